// Package versioning is how a workflow that may have running executions
// changes: each change is a change id asked through workflow.GetVersion,
// and a workflow whose runs would ask for many records a baseline instead.
//
// A workflow.GetVersion costs a new run a version marker and an upsert of
// the TemporalChangeVersion search attribute, which Temporal Cloud bills as
// an action: a collection asking for each of its changes paid for seven
// upserts before it said anything. A Baseline names the changes a workflow
// had when the baseline was declared, with the version each had then: a new
// run records the baseline's one marker and has them all; a run recorded
// before it asks for each change as it did.
//
// A workflow keeps its baselines in a Line, newest first, and calls
// Line.Apply first thing. To declare a successor, prepend it to the line
// (never replace or reorder one): a run recorded under an older baseline
// finds no marker of the newer ones and still gets its own. A change made
// after the newest baseline is asked with Version (or a bump of a change
// the baseline names, with a larger max), which goes to GetVersion until
// the next baseline takes the change in. Retiring a change id or a baseline
// follows docs/architecture.md ("Code layout", workflows).
//
// Rules: workflow code only (deterministic); no gitfleet imports.
package versioning

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// Baseline is one version marker that stands for Changes, each at the
// version it had when the baseline was declared.
type Baseline struct {
	ID      string
	Changes map[string]workflow.Version
}

// Line is a workflow's baselines, newest first. A baseline is never removed
// while a run recorded under it can still be open (docs/architecture.md).
type Line []Baseline

type key struct{}

// Apply returns ctx carrying the baseline the run has: a new run records
// the newest (one marker); a run recorded before gets the one it recorded,
// or none, and ctx as it was.
//
// During replay, GetVersion of a change id the history has no marker of
// returns DefaultVersion and records nothing, so asking for the newer
// baselines first leaves an older run's history untouched.
func (l Line) Apply(ctx workflow.Context) workflow.Context {
	for _, b := range l {
		if workflow.GetVersion(ctx, b.ID, workflow.DefaultVersion, 1) == 1 {
			return workflow.WithValue(ctx, key{}, b)
		}
	}
	return ctx
}

// Version is the run's version of change, which the calling code supports
// from DefaultVersion up to max:
//   - without a baseline naming change, workflow.GetVersion's;
//   - when the run's baseline names change at max, the baseline's (no marker);
//   - when max is above the baseline's version (a change bumped after the
//     baseline), workflow.GetVersion's up to max, where "no marker" means the
//     baseline's version: the run was recorded under the baseline before the
//     bump, and had the baseline's version without asking;
//   - max below the baseline's version is a programming error (the code no
//     longer has the version the run recorded): it panics, which fails the
//     workflow task, loudly, instead of taking another branch.
func Version(ctx workflow.Context, change string, max workflow.Version) workflow.Version {
	b, ok := ctx.Value(key{}).(Baseline)
	if !ok {
		return workflow.GetVersion(ctx, change, workflow.DefaultVersion, max)
	}
	v, named := b.Changes[change]
	switch {
	case !named:
		return workflow.GetVersion(ctx, change, workflow.DefaultVersion, max)
	case max == v:
		return v
	case max < v:
		panic(fmt.Sprintf("versioning: change %s asked up to version %d, but baseline %s records version %d", change, max, b.ID, v))
	}
	if got := workflow.GetVersion(ctx, change, workflow.DefaultVersion, max); got != workflow.DefaultVersion {
		return got
	}
	return v
}
