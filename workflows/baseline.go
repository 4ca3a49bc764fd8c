package workflows

import "go.temporal.io/sdk/workflow"

// A workflow.GetVersion costs a run a version marker and, in a new run,
// an upsert of the TemporalChangeVersion search attribute, which Temporal
// Cloud bills as an action: a collection asking for each of its changes
// paid for seven upserts before it said anything. A baseline names the
// changes a workflow had when the baseline was declared, with the version
// each had then: a new run records the baseline's one version and has them
// all; a run recorded before it asks for each change as it did (version).
type baseline struct {
	id      string
	changes map[string]workflow.Version
}

// collectBaseline is Collect's: every change of a collection up to the
// one-step confirmation of an unchanged repository.
var collectBaseline = baseline{id: "collect-baseline-1", changes: map[string]workflow.Version{
	"manual-resets-failures": 1,
	affinityChange:           1,
	collectCancelChange:      1,
	"scan-after-identity":    1,
	"refused-asks-api":       1,
	"skip-current-scan":      1,
	"outcome-attributes":     1,
	confirmChange:            1,
}}

// shardBaseline is ExecuteShard's: every change of a scan up to it.
var shardBaseline = baseline{id: "execute-shard-baseline-1", changes: map[string]workflow.Version{
	parkedFailsChange:     1,
	"one-mirror-sync":     1,
	"shard-failure-model": 1,
	validateAfterScan:     1,
	affinityChange:        1,
	"outcome-attributes":  1,
}}

type baselineKey struct{}

// withBaseline returns ctx carrying b's changes when the run has b (a new
// run records it here); a run recorded before b gets ctx as it was.
func withBaseline(ctx workflow.Context, b baseline) workflow.Context {
	if workflow.GetVersion(ctx, b.id, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return ctx
	}
	return workflow.WithValue(ctx, baselineKey{}, b.changes)
}

// version is the run's version of change: the baseline's when ctx carries
// one that names change, else workflow.GetVersion's, between
// DefaultVersion and max.
func version(ctx workflow.Context, change string, max workflow.Version) workflow.Version {
	if changes, ok := ctx.Value(baselineKey{}).(map[string]workflow.Version); ok {
		if v, ok := changes[change]; ok {
			return v
		}
	}
	return workflow.GetVersion(ctx, change, workflow.DefaultVersion, max)
}
