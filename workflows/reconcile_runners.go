package workflows

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/snapshot"
)

// ReconcileScheduleID is the Temporal Schedule that starts ReconcileRunners.
const ReconcileScheduleID = "runner-reconcile"

// ReconcileRunnersInput tunes a reconcile; zero values mean defaults.
type ReconcileRunnersInput struct {
	// OfflineAfter: a runner whose heartbeat is older is offline, and its
	// rows in flight fail with snapshot.ReasonOffline (default 2m).
	OfflineAfter time.Duration `json:"offlineAfter,omitempty"`
	// ForgetAfter: an offline runner silent this long is removed for good,
	// with its rows (default 7 days).
	ForgetAfter time.Duration `json:"forgetAfter,omitempty"`
	// RetryBase is the first backoff of a row in error for a transient
	// reason, doubled per retry up to an hour (default 1m).
	RetryBase time.Duration `json:"retryBase,omitempty"`
	// Queue bounds the wait for a runner to answer (default 2m).
	Queue time.Duration `json:"queue,omitempty"`
	// Carry is where a run that continued as new left off.
	Carry *ReconcileCarry `json:"carry,omitempty"`
}

// ReconcileCarry is what a reconcile carries into the run it continues as.
type ReconcileCarry struct {
	// Phase: 0 the sweeps, 1 the runners, 2 the retries, 3 the snapshots
	// to propagate.
	Phase int `json:"phase"`
	// After is the last runner checked (phase 1) or the last snapshot
	// looked at (phase 3); RetryAfter the last row in error looked at.
	After      string                 `json:"after,omitempty"`
	RetryAfter RowKey                 `json:"retryAfter"`
	Result     ReconcileRunnersResult `json:"result"`
}

// ReconcileRunnersResult counts what a reconcile did.
type ReconcileRunnersResult struct {
	Offline   []string `json:"offline,omitempty"`
	Forgotten []string `json:"forgotten,omitempty"`
	Checked   int      `json:"checked"`
	Repulled  int      `json:"repulled"`
	Removed   int      `json:"removed"`
	Finished  int      `json:"finished"`
	Retried   int      `json:"retried"`
	// Propagated are the snapshots whose propagation was started or woken.
	Propagated []string `json:"propagated,omitempty"`
	// Unreachable are runners that did not answer.
	Unreachable []string `json:"unreachable,omitempty"`
}

// ReconcileRunners brings the rows and the runners' stores back into
// agreement (architecture §7), on the runner-reconcile Schedule: silent runners
// become offline and long-silent ones are forgotten; each live runner's
// store is compared with its rows (snapshot.Check: a missing image is
// pulled again, an image no row accounts for is removed, an unfinished
// removal is finished); rows in error for a transient reason are retried
// with backoff; and snapshots that a new runner lacks are propagated to it.
// The pulls themselves are the propagations' work: the reconcile resets
// rows and wakes PropagateSnapshot (signal-with-start).
//
// Everything is read in pages — runners, each runner's rows and images by
// ranges of snapshot names, the rows in error, the snapshots to propagate —
// so that no payload grows with the fleet, and the run continues as new
// when Temporal suggests it, carrying where it was.
func ReconcileRunners(ctx workflow.Context, in ReconcileRunnersInput) (ReconcileRunnersResult, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&in.OfflineAfter, 2*time.Minute)
	def(&in.ForgetAfter, 7*24*time.Hour)
	def(&in.RetryBase, snapshot.DefaultRetryBase)
	def(&in.Queue, 2*time.Minute)
	rc := &reconciler{in: in, woken: map[string]bool{}}
	if in.Carry != nil {
		rc.carry = *in.Carry
	}
	rc.out = rc.carry.Result
	for _, name := range rc.out.Propagated {
		rc.woken[name] = true
	}
	return rc.run(ctx)
}

// fix applies one reconcile action to one runner, scheduling the runner's
// part with admin.
func fix(ctx workflow.Context, in ReconcileRunnersInput, admin func(string, time.Duration) workflow.ActivityOptions, key RowKey,
	f snapshot.Fix, out *ReconcileRunnersResult) error {
	dctx := withOptions(ctx, dbOptions)
	switch f {
	case snapshot.FixRepull:
		var changed bool
		err := workflow.ExecuteActivity(dctx, activityTransitionRow, TransitionRowInput{
			RowKey: key, From: []snapshot.RowState{snapshot.RowReady}, To: snapshot.RowPulling,
		}).Get(ctx, &changed)
		if changed {
			out.Repulled++
		}
		return err
	case snapshot.FixRemoveImage:
		err := workflow.ExecuteActivity(withOptions(ctx, admin(key.RunnerID, in.Queue)), activityRemoveSnapshotImage, key.Snapshot).Get(ctx, nil)
		if err == nil {
			out.Removed++
		}
		return nil // the next reconcile tries again
	case snapshot.FixFinishRemoval:
		if err := workflow.ExecuteActivity(withOptions(ctx, admin(key.RunnerID, in.Queue)), activityRemoveSnapshotImage, key.Snapshot).Get(ctx, nil); err != nil {
			return nil
		}
		if err := workflow.ExecuteActivity(dctx, activityDeleteSnapshotRow, key).Get(ctx, nil); err != nil {
			return err
		}
		out.Finished++
		return workflow.ExecuteActivity(dctx, activityFinishSnapshotRemoval, key.Snapshot).Get(ctx, nil)
	}
	return fmt.Errorf("unknown reconcile fix %q", f)
}

// Page sizes of the paged reconcile: a page of runners is checked at
// once; a range of one runner's rows or images, a page of rows in error or
// of snapshots is a payload of at most a few hundred kilobytes.
const (
	reconcileRunnersAtOnce = 20
	reconcileRowsPage      = 500
	reconcileNamesPage     = 500
)

type reconciler struct {
	in    ReconcileRunnersInput
	carry ReconcileCarry
	out   ReconcileRunnersResult
	// woken are the snapshots whose propagation this run (or one it
	// continued) started or woke.
	woken map[string]bool
}

func (rc *reconciler) run(ctx workflow.Context) (ReconcileRunnersResult, error) {
	dctx := withOptions(ctx, dbOptions)
	for {
		switch rc.carry.Phase {
		case 0:
			if err := workflow.ExecuteActivity(dctx, activityMarkRunnersOffline, rc.in.OfflineAfter).Get(ctx, &rc.out.Offline); err != nil {
				return rc.out, err
			}
			if err := workflow.ExecuteActivity(dctx, activityForgetRunners, rc.in.ForgetAfter).Get(ctx, &rc.out.Forgotten); err != nil {
				return rc.out, err
			}
		case 1:
			var page NamesPage
			if err := workflow.ExecuteActivity(dctx, activityReconcileRunnerIDs,
				PageInput{After: rc.carry.After, Limit: reconcileRunnersAtOnce}).Get(ctx, &page); err != nil {
				return rc.out, err
			}
			if err := rc.checkRunners(ctx, page.Names); err != nil {
				return rc.out, err
			}
			if len(page.Names) > 0 {
				rc.carry.After = page.Names[len(page.Names)-1]
			}
			if !page.Done {
				if rc.shouldContinueAsNew(ctx) {
					return rc.continueAsNew(ctx)
				}
				continue
			}
		case 2:
			var page RetryDuePage
			if err := workflow.ExecuteActivity(dctx, activityRetryDueRows, RetryDueInput{RetryBase: rc.in.RetryBase,
				After: rc.carry.RetryAfter, Limit: reconcileRowsPage}).Get(ctx, &page); err != nil {
				return rc.out, err
			}
			rc.out.Retried += page.Retried
			if err := rc.wake(ctx, page.Snapshots); err != nil {
				return rc.out, err
			}
			rc.carry.RetryAfter = page.Next
			if !page.Done {
				if rc.shouldContinueAsNew(ctx) {
					return rc.continueAsNew(ctx)
				}
				continue
			}
		case 3:
			var page NamesPage
			if err := workflow.ExecuteActivity(dctx, activityUnplacedSnapshots, UnplacedInput{Fresh: rc.in.OfflineAfter,
				PageInput: PageInput{After: rc.carry.After, Limit: reconcileNamesPage}}).Get(ctx, &page); err != nil {
				return rc.out, err
			}
			if err := rc.wake(ctx, page.Names); err != nil {
				return rc.out, err
			}
			if len(page.Names) > 0 {
				rc.carry.After = page.Names[len(page.Names)-1]
			}
			if !page.Done {
				if rc.shouldContinueAsNew(ctx) {
					return rc.continueAsNew(ctx)
				}
				continue
			}
		default:
			out := rc.out
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Checked %d runners (%d unreachable, %d now offline): %d images pulled again, %d removed, %d removals finished, %d rows retried, %d snapshots propagated",
				out.Checked, len(out.Unreachable), len(out.Offline), out.Repulled, out.Removed, out.Finished, out.Retried, len(out.Propagated)))
			return out, nil
		}
		rc.carry.Phase++
		rc.carry.After = ""
	}
}

// shouldContinueAsNew: between two pages, when Temporal suggests it or the
// history is long.
func (rc *reconciler) shouldContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > 5000
}

func (rc *reconciler) continueAsNew(ctx workflow.Context) (ReconcileRunnersResult, error) {
	in := rc.in
	carry := rc.carry
	carry.Result = rc.out
	in.Carry = &carry
	return rc.out, workflow.NewContinueAsNewError(ctx, ReconcileRunners, in)
}

// wake starts or wakes the propagation of the snapshots not woken yet.
func (rc *reconciler) wake(ctx workflow.Context, names []string) error {
	var todo []string
	for _, name := range names {
		if !rc.woken[name] {
			rc.woken[name] = true
			todo = append(todo, name)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	sort.Strings(todo)
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityStartPropagations, todo).Get(ctx, nil); err != nil {
		return err
	}
	rc.out.Propagated = append(rc.out.Propagated, todo...)
	return nil
}

// checkRunners checks runners at once, each on its own coroutine; a
// runner that does not answer is reported unreachable and left for the
// next run.
func (rc *reconciler) checkRunners(ctx workflow.Context, ids []string) error {
	var failed error
	wg := workflow.NewWaitGroup(ctx)
	for _, id := range ids {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			reached, err := rc.checkRunner(ctx, id)
			switch {
			case err != nil && failed == nil:
				failed = err
			case err == nil && !reached:
				rc.out.Unreachable = append(rc.out.Unreachable, id)
			case err == nil:
				rc.out.Checked++
			}
		})
	}
	wg.Wait(ctx)
	return failed
}

// checkRunner compares one runner's store with its rows, a range of
// snapshot names at a time, each range read in the safe order
// (snapshot.Check): rows, images, rows again. It reports false when the
// runner did not answer.
func (rc *reconciler) checkRunner(ctx workflow.Context, id string) (bool, error) {
	dctx := withOptions(ctx, dbOptions)
	admin := withOptions(ctx, runnerAdminOptions(id, rc.in.Queue))
	const limit = reconcileRowsPage
	for after := ""; ; {
		var before, later RunnerRowsPage
		if err := workflow.ExecuteActivity(dctx, activityRunnerRows, RunnerRowsInput{RunnerID: id, After: after, Limit: limit}).Get(ctx, &before); err != nil {
			return false, err
		}
		var held []snapshot.Held
		if err := workflow.ExecuteActivity(admin, activityListSnapshotImagesPage, PageInput{After: after, Limit: limit}).Get(ctx, &held); err != nil {
			return false, nil
		}
		// The range both sides cover in full: up to the last name of a
		// page that came back full, or everything after after.
		upto := ""
		lower := func(name string) {
			if upto == "" || name < upto {
				upto = name
			}
		}
		if len(before.Rows) >= limit {
			lower(before.Rows[len(before.Rows)-1].SnapshotRef)
		}
		if len(held) >= limit {
			lower(held[len(held)-1].Name)
		}
		if err := workflow.ExecuteActivity(dctx, activityRunnerRows, RunnerRowsInput{RunnerID: id, After: after, Upto: upto, Limit: limit}).Get(ctx, &later); err != nil {
			return false, err
		}
		if len(later.Rows) >= limit {
			lower(later.Rows[len(later.Rows)-1].SnapshotRef)
		}
		check := snapshot.Check{Before: upTo(before.Rows, upto), After: upTo(later.Rows, upto), Digests: later.Digests}
		for _, h := range held {
			if upto == "" || h.Name <= upto {
				check.Held = append(check.Held, h)
			}
		}
		if err := rc.apply(ctx, id, check.Actions()); err != nil {
			return true, err
		}
		if upto == "" {
			return true, nil
		}
		after = upto
	}
}

// upTo keeps the rows whose snapshot name is not after upto ("": all).
func upTo(rows []snapshot.Row, upto string) []snapshot.Row {
	if upto == "" {
		return rows
	}
	var out []snapshot.Row
	for _, r := range rows {
		if r.SnapshotRef <= upto {
			out = append(out, r)
		}
	}
	return out
}

// apply fixes what one range of one runner's check found: the rows to
// pull again in one batch, then removals one by one.
func (rc *reconciler) apply(ctx workflow.Context, id string, actions []snapshot.Action) error {
	var repull []string
	for _, a := range actions {
		if a.Fix == snapshot.FixRepull {
			repull = append(repull, a.Snapshot)
		}
	}
	if len(repull) > 0 {
		var moved []string
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityRepullSnapshotRows,
			RepullInput{RunnerID: id, Snapshots: repull}).Get(ctx, &moved); err != nil {
			return err
		}
		rc.out.Repulled += len(moved)
		if err := rc.wake(ctx, moved); err != nil {
			return err
		}
	}
	for _, a := range actions {
		if a.Fix == snapshot.FixRepull {
			continue
		}
		if err := fix(ctx, rc.in, runnerAdminOptions, RowKey{RunnerID: id, Snapshot: a.Snapshot}, a.Fix, &rc.out); err != nil {
			return err
		}
	}
	return nil
}
