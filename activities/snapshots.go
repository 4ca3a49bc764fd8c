package activities

import (
	"context"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// Snapshots are the snapshot workflows' activities on the snapshot tables
// (architecture §7); what happens on a runner's store is Runner's.
type Snapshots struct {
	Store  *store.Store
	Client client.Client
	// Propagation is what StartPropagation starts: the configured timing
	// and fan-out, with the snapshot's name filled in.
	Propagation workflows.PropagateSnapshotInput
	Log         *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Snapshots) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// LoadSnapshot reads a snapshot.
func (s *Snapshots) LoadSnapshot(ctx context.Context, name string) (snapshot.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx, name)
	return snap, AppError(err)
}

// PrepareSnapshotRunners gives every eligible runner a row for the
// snapshot (pulling_snapshot; a row that exists stays as it is) and says
// which rows wait for a pull and which runners hold it ready.
func (s *Snapshots) PrepareSnapshotRunners(ctx context.Context, in workflows.PrepareRunnersInput) (workflows.Fleet, error) {
	now := s.now()
	fleet := workflows.Fleet{Runners: map[string]snapshot.Runner{}}
	eligible, err := s.Store.EligibleRunners(ctx, in.Fresh)
	if err != nil {
		return fleet, AppError(err)
	}
	for _, r := range eligible {
		fleet.Runners[r.ID] = r
		if _, _, err := s.Store.InsertSnapshotRunner(ctx, r.ID, in.Snapshot, snapshot.RowPulling, now); err != nil {
			return fleet, AppError(err)
		}
	}
	rows, err := s.Store.SnapshotRunners(ctx, in.Snapshot)
	if err != nil {
		return fleet, AppError(err)
	}
	fleet.Rows = len(rows)
	for _, row := range rows {
		switch {
		case row.State == snapshot.RowReady:
			if r, err := s.Store.Runner(ctx, row.RunnerID); err == nil && r.State != snapshot.RunnerOffline {
				fleet.Runners[r.ID] = r
				fleet.Ready = append(fleet.Ready, r.ID)
			}
		case row.State == snapshot.RowPulling:
			// Only runners that can take it now; the others wait for the
			// reconcile (offline) or stay out (draining).
			if _, ok := fleet.Runners[row.RunnerID]; ok {
				fleet.ToPull = append(fleet.ToPull, row)
			}
		}
	}
	return fleet, nil
}

// TransitionSnapshotRow moves a row between states, when it is in one of
// the expected ones.
func (s *Snapshots) TransitionSnapshotRow(ctx context.Context, in workflows.TransitionRowInput) (bool, error) {
	if c := in.Count; c != nil {
		// The attempt's own result: exact, where the runner's last write
		// may have lagged it.
		if err := s.Store.RecordPullBytes(ctx, store.PullAttempt{RunID: c.RunID, Attempt: c.Attempt, RunnerID: in.RunnerID,
			Snapshot: in.Snapshot}, c.Received); err != nil {
			return false, AppError(err)
		}
	}
	var changed bool
	var err error
	if in.To == snapshot.RowReady && (in.Size > 0 || in.Source != "") {
		changed, err = s.Store.FinishSnapshotPull(ctx, in.RunnerID, in.Snapshot, in.From, in.Size, in.Source, s.now())
	} else {
		changed, err = s.Store.TransitionSnapshotRunner(ctx, in.RunnerID, in.Snapshot, in.From, in.To, in.Reason, s.now())
	}
	if err == nil && changed {
		s.logger().Info("snapshot row", zap.String("snapshot", in.Snapshot), zap.String("runner", in.RunnerID),
			zap.String("state", string(in.To)), zap.String("reason", in.Reason))
	}
	return changed, AppError(err)
}

// RecordSnapshotImage records a snapshot's reference and digest.
func (s *Snapshots) RecordSnapshotImage(ctx context.Context, in workflows.RecordImageInput) error {
	return AppError(s.Store.SetSnapshotImage(ctx, in.Name, in.ImageRef, in.Digest, s.now()))
}

// ActivateSnapshot marks a snapshot active (a runner holds it).
func (s *Snapshots) ActivateSnapshot(ctx context.Context, name string) (bool, error) {
	changed, err := s.Store.ActivateSnapshot(ctx, name, s.now())
	return changed, AppError(err)
}

// SetSnapshotState sets a snapshot's state.
func (s *Snapshots) SetSnapshotState(ctx context.Context, in workflows.SetSnapshotStateInput) error {
	return AppError(s.Store.SetSnapshotState(ctx, in.Name, in.State, in.Reason, s.now()))
}

// AbandonSnapshot deletes a snapshot that never became active, with its
// rows.
func (s *Snapshots) AbandonSnapshot(ctx context.Context, name string) error {
	return AppError(s.Store.DeleteSnapshot(ctx, name))
}

// MarkSnapshotRemoving starts a removal: the snapshot and its rows become
// removing.
func (s *Snapshots) MarkSnapshotRemoving(ctx context.Context, name string) ([]snapshot.Row, error) {
	rows, err := s.Store.MarkSnapshotRemoving(ctx, name, s.now())
	return rows, AppError(err)
}

// DeleteSnapshotRow deletes a row whose runner let the image go.
func (s *Snapshots) DeleteSnapshotRow(ctx context.Context, key workflows.RowKey) error {
	return AppError(s.Store.DeleteSnapshotRunner(ctx, key.RunnerID, key.Snapshot))
}

// FinishSnapshotRemoval deletes a snapshot being removed once no row is
// left, and reports whether it did.
func (s *Snapshots) FinishSnapshotRemoval(ctx context.Context, name string) (bool, error) {
	done, err := s.Store.FinishSnapshotRemoval(ctx, name)
	return done, AppError(err)
}

// RunnerHeard reports whether a runner heartbeated within in.Within, by
// the database's clock: a pull no slot took asks it before the runner's
// admin queue, since a runner silent that long is gone, not busy.
func (s *Snapshots) RunnerHeard(ctx context.Context, in workflows.RunnerHeardInput) (bool, error) {
	heard, err := s.Store.RunnerHeardWithin(ctx, in.RunnerID, in.Within)
	return heard, AppError(err)
}

// PullBytes sums what every attempt of a propagation run's pulls made the
// registry and the peers send.
func (s *Snapshots) PullBytes(ctx context.Context, runID string) (workflows.PullBytes, error) {
	registry, peers, err := s.Store.PullBytes(ctx, runID)
	return workflows.PullBytes{Registry: registry, Peers: peers}, AppError(err)
}

// MarkRunnersOffline marks runners silent for longer than after offline,
// and fails their pulls in flight. Silence is measured on the database's
// clock, which wrote the heartbeats, not on this worker's.
func (s *Snapshots) MarkRunnersOffline(ctx context.Context, after time.Duration) ([]string, error) {
	ids, err := s.Store.MarkRunnersOffline(ctx, after, s.now())
	if len(ids) > 0 {
		s.logger().Warn("runners offline", zap.Strings("runners", ids))
	}
	return ids, AppError(err)
}

// ForgetRunners removes runners offline for longer than after, with their
// rows.
func (s *Snapshots) ForgetRunners(ctx context.Context, after time.Duration) ([]string, error) {
	ids, err := s.Store.ForgetRunners(ctx, after)
	if len(ids) > 0 {
		s.logger().Warn("runners forgotten", zap.Strings("runners", ids))
	}
	return ids, AppError(err)
}

// ReconcileRunnerIDs lists a page of the runners that are not offline, by
// id (byte order).
func (s *Snapshots) ReconcileRunnerIDs(ctx context.Context, in workflows.PageInput) (workflows.NamesPage, error) {
	ids, err := s.Store.ReconcileRunnerIDs(ctx, in.After, in.Limit)
	return workflows.NamesPage{Names: ids, Done: len(ids) < in.Limit}, AppError(err)
}

// RunnerRows reads a range of one runner's rows with their snapshots'
// digests.
func (s *Snapshots) RunnerRows(ctx context.Context, in workflows.RunnerRowsInput) (workflows.RunnerRowsPage, error) {
	rows, digests, err := s.Store.RunnerRowsRange(ctx, in.RunnerID, in.After, in.Upto, in.Limit)
	return workflows.RunnerRowsPage{Rows: rows, Digests: digests}, AppError(err)
}

// RepullSnapshotRows moves a runner's ready rows whose images are gone
// back to pulling_snapshot, and returns the snapshots it moved.
func (s *Snapshots) RepullSnapshotRows(ctx context.Context, in workflows.RepullInput) ([]string, error) {
	moved, err := s.Store.RepullRows(ctx, in.RunnerID, in.Snapshots, s.now())
	if len(moved) > 0 {
		s.logger().Info("snapshot images gone: pulling again", zap.String("runner", in.RunnerID), zap.Strings("snapshots", moved))
	}
	return moved, AppError(err)
}

// RetryDueRows retries, among a page of the rows in error, those whose
// reason may pass and whose backoff has passed (snapshot.DueForRetry): they
// go back to pulling_snapshot.
func (s *Snapshots) RetryDueRows(ctx context.Context, in workflows.RetryDueInput) (workflows.RetryDuePage, error) {
	page := workflows.RetryDuePage{Next: in.After}
	rows, err := s.Store.RowsInErrorAfter(ctx, in.After.RunnerID, in.After.Snapshot, in.Limit)
	if err != nil {
		return page, AppError(err)
	}
	page.Done = len(rows) < in.Limit
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		page.Next = workflows.RowKey{RunnerID: last.RunnerID, Snapshot: last.SnapshotRef}
	}
	now := s.now()
	due := snapshot.DueForRetry(rows, now, in.RetryBase)
	if len(due) == 0 {
		return page, nil
	}
	moved, err := s.Store.RetryRowsInError(ctx, due, now)
	if err != nil {
		return page, AppError(err)
	}
	page.Retried = len(moved)
	seen := map[string]bool{}
	for _, r := range moved {
		if !seen[r.SnapshotRef] {
			seen[r.SnapshotRef] = true
			page.Snapshots = append(page.Snapshots, r.SnapshotRef)
		}
	}
	slices.Sort(page.Snapshots)
	return page, nil
}

// UnplacedSnapshots lists a page of the snapshots to propagate: active ones
// an eligible runner has no row for, and those with a row waiting for a
// pull on an eligible runner.
func (s *Snapshots) UnplacedSnapshots(ctx context.Context, in workflows.UnplacedInput) (workflows.NamesPage, error) {
	names, err := s.Store.UnplacedSnapshots(ctx, in.Fresh, in.After, in.Limit)
	return workflows.NamesPage{Names: names, Done: len(names) < in.Limit}, AppError(err)
}

// StartPropagations starts or wakes the propagations of the named
// snapshots; a retry starts them all again, which only wakes the running
// ones once more.
func (s *Snapshots) StartPropagations(ctx context.Context, names []string) error {
	for _, name := range names {
		if err := s.StartPropagation(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// StartPropagation starts a snapshot's propagation or wakes the running
// one.
func (s *Snapshots) StartPropagation(ctx context.Context, name string) error {
	in := s.Propagation
	in.Name = name
	_, err := workflows.StartPropagation(ctx, s.Client, in)
	return AppError(err)
}

func (s *Snapshots) logger() *zap.Logger {
	if s.Log == nil {
		return zap.NewNop()
	}
	return s.Log
}
