package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/snapshot"
)

const runnerColumns = `id, peer_addr, capacity, quota_bytes, state, last_heartbeat, registered_at`

func scanRunner(row pgx.Row) (snapshot.Runner, error) {
	var r snapshot.Runner
	err := row.Scan(&r.ID, &r.PeerAddr, &r.Capacity, &r.QuotaBytes, &r.State, &r.LastHeartbeat, &r.RegisteredAt)
	return r, err
}

func collectRunners(rows pgx.Rows, err error) ([]snapshot.Runner, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (snapshot.Runner, error) { return scanRunner(row) })
}

func runnerNotRegistered(id string) error {
	return &notFoundError{fmt.Sprintf("runner %q is not registered", id)}
}

// RegisterRunner adds a runner or updates its address, capacity and quota.
// A runner that registers is alive: a new or offline one becomes ready,
// but a draining one stays draining, since draining is an operator's
// decision a restart must not undo.
//
// Its registration and heartbeat times are the database's clock, as every
// liveness test is (EligibleRunners, MarkRunnersOffline, ForgetRunners):
// a runner whose own clock is off is neither taken offline while alive nor
// kept alive while silent.
func (s *Store) RegisterRunner(ctx context.Context, r snapshot.Runner) error {
	if err := snapshot.ValidRunnerID(r.ID); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO runners (id, peer_addr, capacity, quota_bytes, state, last_heartbeat, registered_at)
		VALUES ($1, $2, $3, $4, 'ready', now(), now())
		ON CONFLICT (id) DO UPDATE SET peer_addr = excluded.peer_addr, capacity = excluded.capacity,
			quota_bytes = excluded.quota_bytes, last_heartbeat = excluded.last_heartbeat,
			state = CASE WHEN runners.state = 'draining' THEN 'draining' ELSE 'ready' END`,
		r.ID, r.PeerAddr, r.Capacity, r.QuotaBytes)
	if err != nil {
		return fmt.Errorf("register runner %q: %w", r.ID, err)
	}
	return nil
}

// HeartbeatRunner records that a runner is alive, at the database's now();
// an offline runner is back (ready), a draining one stays draining.
func (s *Store) HeartbeatRunner(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE runners SET last_heartbeat = now(),
			state = CASE WHEN state = 'offline' THEN 'ready' ELSE state END
		WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("heartbeat of runner %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return runnerNotRegistered(id)
	}
	return nil
}

// RunnerHeardWithin reports whether a runner's last heartbeat is within d
// of the database's now() (the clock that wrote it); a runner not
// registered was not heard.
func (s *Store) RunnerHeardWithin(ctx context.Context, id string, d time.Duration) (bool, error) {
	var heard bool
	err := s.pool.QueryRow(ctx, `SELECT last_heartbeat >= now() - $2 * interval '1 microsecond' FROM runners WHERE id = $1`,
		id, micros(d)).Scan(&heard)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat of runner %q: %w", id, err)
	}
	return heard, nil
}

// micros is a duration as the bigint of microseconds the liveness queries
// subtract from now() ($n * interval '1 microsecond').
func micros(d time.Duration) int64 { return d.Microseconds() }

// SetRunnerState drains or resumes a runner (or takes it offline). Taking
// it offline fails its pulls and builds in flight as MarkRunnersOffline
// does, so that they are retried rather than awaited.
func (s *Store) SetRunnerState(ctx context.Context, id string, state snapshot.RunnerState, now time.Time) error {
	switch state {
	case snapshot.RunnerReady, snapshot.RunnerDraining, snapshot.RunnerOffline:
	default:
		return fmt.Errorf("%w runner state %q", snapshot.ErrInvalid, state)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE runners SET state = $2 WHERE id = $1`, id, string(state))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return runnerNotRegistered(id)
		}
		if state == snapshot.RunnerOffline {
			return failInFlight(ctx, tx, []string{id}, now)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("set runner %q %s: %w", id, state, err)
	}
	return err
}

// failInFlight puts the pulls and builds of runners that went offline in
// error with the transient offline reason: the reconcile retries them once
// the runner is back, instead of the propagation waiting on them.
func failInFlight(ctx context.Context, tx pgx.Tx, ids []string, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE snapshot_runners SET state = 'error', error_reason = $2, updated_at = $3
		WHERE runner_id = ANY($1) AND state IN ('pulling_snapshot', 'building_snapshot')`,
		ids, snapshot.ReasonOffline, now)
	return err
}

// Runner returns a registered runner.
func (s *Store) Runner(ctx context.Context, id string) (snapshot.Runner, error) {
	r, err := scanRunner(s.pool.QueryRow(ctx, `SELECT `+runnerColumns+` FROM runners WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return snapshot.Runner{}, runnerNotRegistered(id)
	}
	if err != nil {
		return snapshot.Runner{}, fmt.Errorf("runner %q: %w", id, err)
	}
	return r, nil
}

// Runners lists every registered runner, by id.
func (s *Store) Runners(ctx context.Context) ([]snapshot.Runner, error) {
	return collectRunners(s.pool.Query(ctx, `SELECT `+runnerColumns+` FROM runners ORDER BY id`))
}

// RunnerStatus is a registered runner with how long it has been silent.
type RunnerStatus struct {
	snapshot.Runner
	// Silent is how long ago its last heartbeat was, by the database's
	// clock when it was read: what a runner is now follows from it, not
	// only from its state, which the reconcile updates every few minutes.
	Silent time.Duration
}

// RunnerStatuses lists every registered runner with its silence, by id.
func (s *Store) RunnerStatuses(ctx context.Context) ([]RunnerStatus, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runnerColumns+`, extract(epoch FROM now() - last_heartbeat) FROM runners ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("runners: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (RunnerStatus, error) {
		var r RunnerStatus
		var silent float64
		err := row.Scan(&r.ID, &r.PeerAddr, &r.Capacity, &r.QuotaBytes, &r.State, &r.LastHeartbeat, &r.RegisteredAt, &silent)
		r.Silent = time.Duration(silent * float64(time.Second))
		return r, err
	})
}

// EligibleRunners lists the runners that take new pulls: ready, with a
// heartbeat within fresh of the database's now(), by id. The freshness
// test covers the gap between a runner dying and MarkRunnersOffline
// noticing.
func (s *Store) EligibleRunners(ctx context.Context, fresh time.Duration) ([]snapshot.Runner, error) {
	return collectRunners(s.pool.Query(ctx, `SELECT `+runnerColumns+` FROM runners
		WHERE state = 'ready' AND last_heartbeat >= now() - $1 * interval '1 microsecond' ORDER BY id`, micros(fresh)))
}

// MarkRunnersOffline takes runners silent for longer than after (by the
// database's clock, which wrote their heartbeats) offline and fails their
// pulls and builds in flight (reason snapshot.ReasonOffline, the rows'
// state change at now), in one transaction so that no row is left waiting
// on a runner already declared gone. It returns their ids, sorted.
//
// A heartbeat racing the sweep wins or loses whole: the UPDATE re-checks
// last_heartbeat on the row version the heartbeat committed.
func (s *Store) MarkRunnersOffline(ctx context.Context, after time.Duration, now time.Time) ([]string, error) {
	var ids []string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE runners SET state = 'offline'
			WHERE state <> 'offline' AND last_heartbeat < now() - $1 * interval '1 microsecond' RETURNING id`, micros(after))
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(ids) == 0 {
			return err
		}
		return failInFlight(ctx, tx, ids, now)
	})
	if err != nil {
		return nil, fmt.Errorf("mark runners offline: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// ForgetRunners deletes the runners offline and silent for longer than
// after (by the database's clock), with their rows, and returns their ids,
// sorted. A forgotten runner that comes back registers anew.
func (s *Store) ForgetRunners(ctx context.Context, after time.Duration) ([]string, error) {
	// A snapshot being removed whose last rows were on forgotten runners
	// has nothing left to wait for: its removal ends here, in the same
	// statement (its RemoveSnapshot, if still running, finds it gone).
	rows, err := s.pool.Query(ctx, `
		WITH forgotten AS (
			DELETE FROM runners WHERE state = 'offline' AND last_heartbeat < now() - $1 * interval '1 microsecond' RETURNING id
		), orphaned AS (
			DELETE FROM snapshots sn WHERE sn.state = 'removing'
			AND EXISTS (SELECT 1 FROM snapshot_runners sr
				WHERE sr.snapshot_ref = sn.name AND sr.runner_id IN (SELECT id FROM forgotten))
			AND NOT EXISTS (SELECT 1 FROM snapshot_runners sr
				WHERE sr.snapshot_ref = sn.name AND sr.runner_id NOT IN (SELECT id FROM forgotten))
		)
		SELECT id FROM forgotten`, micros(after))
	if err != nil {
		return nil, fmt.Errorf("forget runners: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("forget runners: %w", err)
	}
	// Pull counts are summed by their propagation run within hours; kept
	// as long as a forgotten runner, they are long past use.
	if _, err := s.pool.Exec(ctx, `DELETE FROM snapshot_pull_bytes WHERE updated_at < now() - $1 * interval '1 microsecond'`,
		micros(after)); err != nil {
		return nil, fmt.Errorf("forget pull counts: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}
