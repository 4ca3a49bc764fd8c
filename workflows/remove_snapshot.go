package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/snapshot"
)

// RemoveSnapshotWorkflowID is the id of a snapshot's removal.
func RemoveSnapshotWorkflowID(name string) string { return "snapshot-remove:" + name }

// RemoveSnapshotInput names the snapshot to remove.
type RemoveSnapshotInput struct {
	Name string `json:"name"`
	// Queue bounds the wait for each runner to pick the removal up
	// (default 2m): an offline runner is finished by the reconcile.
	Queue time.Duration `json:"queue,omitempty"`
}

// RemoveSnapshotResult says how far the removal got.
type RemoveSnapshotResult struct {
	Removed int `json:"removed"`
	// Waiting are runners that did not answer; their rows stay removing
	// until the reconcile finishes them, and the snapshot with them.
	Waiting []string `json:"waiting,omitempty"`
	Deleted bool     `json:"deleted"`
}

// RemoveSnapshot takes a snapshot off every runner (architecture §7): its rows
// become removing, each runner removes the image and garbage-collects the
// blobs no other image uses, each row is deleted as its runner confirms,
// and the snapshot goes with the last row.
func RemoveSnapshot(ctx workflow.Context, in RemoveSnapshotInput) (RemoveSnapshotResult, error) {
	var out RemoveSnapshotResult
	var rows []snapshot.Row
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityMarkSnapshotRemoving, in.Name).Get(ctx, &rows); err != nil {
		return out, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Removing snapshot %s from %d runners", in.Name, len(rows)))
	queue := PullTiming{Queue: in.Queue}.withDefaults().Queue
	admin := runnerAdminOptions
	futures := make([]workflow.Future, len(rows))
	for i, r := range rows {
		futures[i] = workflow.ExecuteActivity(withOptions(ctx, admin(r.RunnerID, queue)), activityRemoveSnapshotImage, in.Name)
	}
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			out.Waiting = append(out.Waiting, rows[i].RunnerID)
			continue
		}
		key := RowKey{RunnerID: rows[i].RunnerID, Snapshot: in.Name}
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityDeleteSnapshotRow, key).Get(ctx, nil); err != nil {
			return out, err
		}
		out.Removed++
	}
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityFinishSnapshotRemoval, in.Name).Get(ctx, &out.Deleted); err != nil {
		return out, err
	}
	if out.Deleted {
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Snapshot %s removed from %d runners", in.Name, out.Removed))
	} else {
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Snapshot %s removed from %d runners; %v did not answer (the reconcile finishes them)",
			in.Name, out.Removed, out.Waiting))
	}
	return out, nil
}
