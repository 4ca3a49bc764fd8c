package workflows

import (
	"go.temporal.io/sdk/workflow"

	"gitfleet/workflows/versioning"
)

// Collect and ExecuteShard record a baseline (package versioning): one
// version marker for every change they had when it was declared.
//
// Adding a change id: call version(ctx, "my-change", 1) where the workflow
// branches (any workflow; without a baseline naming it, it is
// workflow.GetVersion), record a history of the new path (replay_test.go),
// and say in docs/architecture.md what runs recorded before it do. Bumping
// a change a baseline names: version(ctx, id, 2), never a lower max.
// Declaring the next baseline: prepend it to the line (never replace one),
// naming every change id the workflow still asks with its current max, and
// record a history under it (TestEveryBaselineHasAHistory).

// collectBaselines are Collect's, newest first.
var collectBaselines = versioning.Line{
	// Every change up to push-time detection and code scanning uploads:
	// a collection keeps one version marker (architecture, "Capacity").
	{ID: "collect-baseline-2", Changes: map[string]workflow.Version{
		"manual-resets-failures": 1,
		affinityChange:           1,
		collectCancelChange:      1,
		"scan-after-identity":    1,
		"refused-asks-api":       1,
		"skip-current-scan":      1,
		"outcome-attributes":     1,
		confirmChange:            1,
		pushFollowUp:             1,
		codeScanningChange:       1,
	}},
	// Every change of a collection up to the one-step confirmation of an
	// unchanged repository.
	{ID: "collect-baseline-1", Changes: map[string]workflow.Version{
		"manual-resets-failures": 1,
		affinityChange:           1,
		collectCancelChange:      1,
		"scan-after-identity":    1,
		"refused-asks-api":       1,
		"skip-current-scan":      1,
		"outcome-attributes":     1,
		confirmChange:            1,
	}},
}

// shardBaselines are ExecuteShard's, newest first.
var shardBaselines = versioning.Line{
	// Every change of a scan up to it.
	{ID: "execute-shard-baseline-1", Changes: map[string]workflow.Version{
		parkedFailsChange:     1,
		"one-mirror-sync":     1,
		"shard-failure-model": 1,
		validateAfterScan:     1,
		affinityChange:        1,
		"outcome-attributes":  1,
	}},
}

// Baselines are the lines of the workflows that record a baseline, by
// workflow type; replay tests check each baseline has a recorded history.
func Baselines() map[string]versioning.Line {
	return map[string]versioning.Line{"Collect": collectBaselines, "ExecuteShard": shardBaselines}
}

// version is the run's version of change, from DefaultVersion up to max:
// see versioning.Version.
func version(ctx workflow.Context, change string, max workflow.Version) workflow.Version {
	return versioning.Version(ctx, change, max)
}
