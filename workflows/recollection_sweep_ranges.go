package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/sweeprange"
)

const (
	// sweepRangesChange: the passes that split the fleet into ranges, one
	// child sweep a range (RecollectionSweepInput.Ranges).
	sweepRangesChange = "sweep-ranges"
	// SweepRangesPerWorker asks for one range per live worker
	// (RecollectionSweepInput.Ranges; GITFLEET_SWEEP_RANGES=auto).
	SweepRangesPerWorker = -1
)

// SweepRangeWorkflowID is the workflow id of range r's sweep in a pass
// whose sweeps are named base (the schedule's id, for scheduled passes):
// "recollection-sweep:3-of-16", as the Web UI and `temporal workflow
// list` show it. One id a range: a range's sweep never runs twice at once.
func SweepRangeWorkflowID(base string, r sweeprange.Range) string {
	return base + ":" + r.String()
}

// sweepPass is a pass that splits the fleet: it asks how many ranges
// (SweepRanges: fixed, or one per live worker), and with more than one
// starts a child RecollectionSweep a range, on the pass's clock, and waits
// for them all; with one it is the single sweep of before, in this run.
//
// Each codebase falls in exactly one range (sweeprange: buckets of a hash
// of its id, fixed for the pass), so no codebase is read twice in a pass
// and none is left out. The number of ranges is decided once, at the
// pass's start: a change (GITFLEET_SWEEP_RANGES, or workers joining and
// leaving) takes effect at the next pass, and passes never overlap (the
// schedule skips while one runs), so a change cannot make two splits read
// the fleet at once. What a pass checked it recorded (last_checked_at),
// and the next pass, however split, finds it not due.
func sweepPass(ctx workflow.Context, in RecollectionSweepInput) (SweepResult, error) {
	in.defaults(ctx)
	var n int
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activitySweepRanges, max(in.Ranges, 0)).Get(ctx, &n); err != nil {
		return SweepResult{}, err
	}
	if n <= 1 {
		in.Ranges = 0
		return recollectionSweep(ctx, in)
	}
	base := in.Carry
	if base == "" {
		base = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	type child struct {
		r sweeprange.Range
		f workflow.ChildWorkflowFuture
	}
	children := make([]child, n)
	for k := range n {
		r := sweeprange.Range{K: k, N: n}
		sub := in
		sub.Ranges, sub.Range, sub.Stats = 0, &r, SweepResult{}
		if in.Carry != "" {
			// Each range hands its halted hosts on to its successor.
			sub.Carry = SweepRangeWorkflowID(in.Carry, r)
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: SweepRangeWorkflowID(base, r),
			Memo: map[string]any{"target": fmt.Sprintf("range %s of the codebases viewed in the last 90 days and due for a refresh", r),
				"range": r.String()},
		})
		children[k] = child{r, workflow.ExecuteChildWorkflow(cctx, RecollectionSweep, sub)}
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Sweeping in %d ranges", n))
	stats := SweepResult{Ranges: n, Runs: 1}
	var failed []string
	var errs []error
	for _, c := range children {
		var res SweepResult
		if err := c.f.Get(ctx, &res); err != nil {
			failed = append(failed, c.r.String())
			errs = append(errs, fmt.Errorf("range %s: %w", c.r, err))
			continue
		}
		stats.add(res)
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Sweeping in %d ranges: %s", n, stats.String()))
	}
	if len(errs) > 0 {
		workflow.GetLogger(ctx).Warn("Sweep ranges failed", "ranges", strings.Join(failed, ", "), "result", stats.String())
		return stats, errors.Join(errs...)
	}
	return finish(ctx, stats)
}

// add counts a range's result into the pass's.
func (r *SweepResult) add(o SweepResult) {
	r.Considered += o.Considered
	r.Due += o.Due
	r.Unchanged += o.Unchanged
	r.Started += o.Started
	r.Failed += o.Failed
	r.Gone += o.Gone
	r.Waits += o.Waits
	r.Skipped += o.Skipped
	r.Deferred += o.Deferred
	r.Runs += o.Runs
	r.HaltedHosts = append(r.HaltedHosts, o.HaltedHosts...)
	if o.Halted {
		reason := o.HaltReason
		if r.Halted {
			reason = r.HaltReason + "; " + reason
		}
		r.Halted, r.HaltReason = true, reason
	}
}
