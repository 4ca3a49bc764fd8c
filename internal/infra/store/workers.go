package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"gitfleet/internal/domain/placement"
)

// Worker is a registered worker as `starter worker list` shows it.
type Worker struct {
	ID string
	// TaskQueue is the workflows' queue it serves.
	TaskQueue     string
	State         placement.State
	LastHeartbeat time.Time
	// Silent is how long ago its last heartbeat was, by the database's
	// clock when it was read.
	Silent time.Duration
	// Left is when it stopped and left the fleet (zero while it runs): it
	// owns nothing from then on, whatever its last heartbeat.
	Left        time.Time
	Mirrors     int64
	MirrorBytes int64
}

// RegisterWorker adds a worker or marks it alive again (back from leaving,
// too). A draining worker stays draining: draining is an operator's
// decision a restart must not undo. Times are the database's clock, as for
// runners. The row is the session role's (owner): where roles are split
// (migration 00047, row-level security), another role's row with this id
// is an error, not taken over.
func (s *Store) RegisterWorker(ctx context.Context, id, taskQueue string) error {
	if err := placement.ValidWorkerID(id); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO workers (id, task_queue) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET last_heartbeat = now(), task_queue = excluded.task_queue, left_at = NULL, owner = current_user`,
		id, taskQueue)
	if err != nil {
		return fmt.Errorf("register worker %q: %w", id, err)
	}
	return nil
}

// HeartbeatWorker records that a worker is alive — it polls its queue —,
// with the mirrors it holds. A heartbeat after a leave is another process
// polling under the same id: the worker is back. Another role's row is not
// found (row-level security hides it from the update); a row from before
// owners (NULL) becomes this role's.
func (s *Store) HeartbeatWorker(ctx context.Context, id string, mirrors, bytes int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE workers SET last_heartbeat = now(), left_at = NULL, mirrors = $2, mirror_bytes = $3,
		owner = current_user WHERE id = $1`,
		id, mirrors, bytes)
	if err != nil {
		return fmt.Errorf("heartbeat of worker %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return &notFoundError{fmt.Sprintf("worker %q is not registered", id)}
	}
	return nil
}

// LiveWorkers lists the workers that take repositories of the workflows
// on taskQueue: active, not left, with a heartbeat within fresh of the
// database's now(), by id.
func (s *Store) LiveWorkers(ctx context.Context, taskQueue string, fresh time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM workers
		WHERE task_queue = $1 AND state = 'active' AND left_at IS NULL
		AND last_heartbeat >= now() - $2 * interval '1 microsecond' ORDER BY id`,
		taskQueue, micros(fresh))
	if err != nil {
		return nil, fmt.Errorf("live workers: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Workers lists every registered worker, by id.
func (s *Store) Workers(ctx context.Context) ([]Worker, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, task_queue, state, last_heartbeat, extract(epoch FROM now() - last_heartbeat),
		coalesce(left_at, '-infinity'), mirrors, mirror_bytes
		FROM workers ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Worker, error) {
		var w Worker
		var silent float64
		var left pgtype.Timestamptz
		err := row.Scan(&w.ID, &w.TaskQueue, &w.State, &w.LastHeartbeat, &silent, &left, &w.Mirrors, &w.MirrorBytes)
		w.Silent = time.Duration(silent * float64(time.Second))
		if left.Valid && left.InfinityModifier == pgtype.Finite {
			w.Left = left.Time
		}
		return w, err
	})
}

// SetWorkerState drains a worker (its repositories go to their next
// owners) or makes it take repositories again: an operator's change to a
// row not its own, through the one function that changes the state and
// nothing else (gitfleet_set_worker_state, migration 00047).
func (s *Store) SetWorkerState(ctx context.Context, id string, state placement.State) error {
	if state != placement.Active && state != placement.Draining {
		return fmt.Errorf("worker state %q: want %s or %s", state, placement.Active, placement.Draining)
	}
	var found bool
	if err := s.pool.QueryRow(ctx, `SELECT gitfleet_set_worker_state($1, $2)`, id, string(state)).Scan(&found); err != nil {
		return fmt.Errorf("set worker %q %s: %w", id, state, err)
	}
	if !found {
		return &notFoundError{fmt.Sprintf("worker %q is not registered", id)}
	}
	return nil
}

// LeaveWorker marks a stopping worker gone before it drains: it owns
// nothing from now on, so its repositories' new work goes to their next
// owners at once instead of one offline bound later. Its running work
// finishes where it is.
func (s *Store) LeaveWorker(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE workers SET left_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("worker %q leaves: %w", id, err)
	}
	return nil
}

// ForgetWorkers deletes the rows of workers silent for longer than after
// (left or dead), by the database's clock, and returns their ids, sorted.
// They own nothing already; a forgotten worker that comes back registers
// anew. Other roles' rows too, through gitfleet_forget_workers (migration
// 00047), which never deletes a row heard of within the hour, whatever
// after says: a live worker's row cannot be deleted by another.
func (s *Store) ForgetWorkers(ctx context.Context, after time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT * FROM gitfleet_forget_workers($1 * interval '1 microsecond')`,
		micros(after))
	if err != nil {
		return nil, fmt.Errorf("forget workers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("forget workers: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}
