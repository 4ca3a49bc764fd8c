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
// store is compared with its rows (snapshot.Reconcile: a missing image is
// pulled again, an image no row accounts for is removed, an unfinished
// removal is finished); rows in error for a transient reason are retried
// with backoff; and snapshots that a new runner lacks are propagated to it.
// The pulls themselves are the propagations' work: the reconcile resets
// rows and wakes PropagateSnapshot (signal-with-start).
func ReconcileRunners(ctx workflow.Context, in ReconcileRunnersInput) (ReconcileRunnersResult, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&in.OfflineAfter, 2*time.Minute)
	def(&in.ForgetAfter, 7*24*time.Hour)
	def(&in.RetryBase, time.Minute)
	def(&in.Queue, 2*time.Minute)
	var out ReconcileRunnersResult
	dctx := withOptions(ctx, dbOptions)
	if err := workflow.ExecuteActivity(dctx, activityMarkRunnersOffline, in.OfflineAfter).Get(ctx, &out.Offline); err != nil {
		return out, err
	}
	if err := workflow.ExecuteActivity(dctx, activityForgetRunners, in.ForgetAfter).Get(ctx, &out.Forgotten); err != nil {
		return out, err
	}
	var view ReconcileView
	if err := workflow.ExecuteActivity(dctx, activityReconcileView, ReconcileViewInput{Fresh: in.OfflineAfter}).Get(ctx, &view); err != nil {
		return out, err
	}

	wake := map[string]bool{}
	for _, name := range view.Unplaced {
		wake[name] = true
	}
	// Ask every runner at once what it holds; fix each as its answer comes.
	held := make([]workflow.Future, len(view.Runners))
	for i, rr := range view.Runners {
		held[i] = workflow.ExecuteActivity(withOptions(ctx, runnerAdminOptions(rr.Runner.ID, in.Queue)), activityListSnapshotImages)
	}
	for i, rr := range view.Runners {
		var images []snapshot.Held
		if err := held[i].Get(ctx, &images); err != nil {
			out.Unreachable = append(out.Unreachable, rr.Runner.ID)
			continue
		}
		out.Checked++
		for _, a := range snapshot.Reconcile(rr.Rows, view.Digests, images) {
			key := RowKey{RunnerID: rr.Runner.ID, Snapshot: a.Snapshot}
			if err := fix(ctx, in, key, a.Fix, &out); err != nil {
				return out, err
			}
			if a.Fix == snapshot.FixRepull {
				wake[a.Snapshot] = true
			}
		}
	}
	for _, r := range snapshot.DueForRetry(view.Errors, workflow.Now(ctx), in.RetryBase) {
		var changed bool
		err := workflow.ExecuteActivity(dctx, activityTransitionRow, TransitionRowInput{
			RowKey: RowKey{RunnerID: r.RunnerID, Snapshot: r.SnapshotRef},
			From:   []snapshot.RowState{snapshot.RowError}, To: snapshot.RowPulling,
		}).Get(ctx, &changed)
		if err != nil {
			return out, err
		}
		if changed {
			out.Retried++
			wake[r.SnapshotRef] = true
		}
	}
	names := make([]string, 0, len(wake))
	for name := range wake {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := workflow.ExecuteActivity(dctx, activityStartPropagation, name).Get(ctx, nil); err != nil {
			return out, err
		}
		out.Propagated = append(out.Propagated, name)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Checked %d runners (%d unreachable, %d now offline): %d images pulled again, %d removed, %d removals finished, %d rows retried",
		out.Checked, len(out.Unreachable), len(out.Offline), out.Repulled, out.Removed, out.Finished, out.Retried))
	return out, nil
}

// fix applies one reconcile action to one runner.
func fix(ctx workflow.Context, in ReconcileRunnersInput, key RowKey, f snapshot.Fix, out *ReconcileRunnersResult) error {
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
		err := workflow.ExecuteActivity(withOptions(ctx, runnerAdminOptions(key.RunnerID, in.Queue)), activityRemoveSnapshotImage, key.Snapshot).Get(ctx, nil)
		if err == nil {
			out.Removed++
		}
		return nil // the next reconcile tries again
	case snapshot.FixFinishRemoval:
		if err := workflow.ExecuteActivity(withOptions(ctx, runnerAdminOptions(key.RunnerID, in.Queue)), activityRemoveSnapshotImage, key.Snapshot).Get(ctx, nil); err != nil {
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
