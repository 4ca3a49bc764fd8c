package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/errclass"
)

var (
	// ErrNotFound marks a snapshot, runner or row that does not exist; the
	// error's message names which. It is Permanent: an activity asking for
	// something that is gone gains nothing by asking again.
	ErrNotFound = errclass.Wrap(errclass.Permanent, errclass.ReasonNotFound, errors.New("not found"))
	// ErrSnapshotExists: another snapshot (another image) holds the name.
	ErrSnapshotExists = errors.New("snapshot exists")
)

// notFoundError carries a message naming the missing thing, so that callers
// can show it as it is and still test errors.Is(err, ErrNotFound).
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return ErrNotFound }

type snapshotExistsError struct{ msg string }

func (e *snapshotExistsError) Error() string { return e.msg }
func (e *snapshotExistsError) Unwrap() error { return ErrSnapshotExists }

func snapshotMissing(name string) error {
	return &notFoundError{fmt.Sprintf("snapshot %q does not exist", name)}
}

func rowMissing(runnerID, ref string) error {
	return &notFoundError{fmt.Sprintf("snapshot %q is not on runner %q", ref, runnerID)}
}

// describe says what a snapshot is an image of, for conflict messages.
func describe(s snapshot.Snapshot) string {
	var d string
	switch s.Kind {
	case snapshot.KindRepo:
		d = fmt.Sprintf("built from %s (codebase %d) at %s", s.Repo, s.CodebaseID, s.Commit)
	default:
		d = "of image " + s.ImageRef
	}
	if s.BaseImage != "" {
		d += " on " + s.BaseImage
	}
	return d
}

const snapshotColumns = `name, kind, image_ref, digest, coalesce(repo, ''), coalesce(codebase_id, 0),
	coalesce(external_id, ''), coalesce(commit_sha, ''), base_image, state, error_reason, created_at, updated_at`

func scanSnapshot(row pgx.Row) (snapshot.Snapshot, error) {
	var s snapshot.Snapshot
	err := row.Scan(&s.Name, &s.Kind, &s.ImageRef, &s.Digest, &s.Repo, &s.CodebaseID,
		&s.ExternalID, &s.Commit, &s.BaseImage, &s.State, &s.ErrorReason, &s.CreatedAt, &s.UpdatedAt)
	return s, err
}

// CreateSnapshot adds a pending snapshot. When the name is taken by a
// snapshot of the same source (snapshot.Snapshot.SameSource), the request
// joins it: the stored snapshot comes back with existed set, whatever its
// state (a caller that wants a fresh one checks for removing). A name taken
// by another image is ErrSnapshotExists.
//
// Of concurrent identical creates exactly one inserts: ON CONFLICT DO
// NOTHING waits for the winner to commit, and the SELECT that follows (a
// new statement, so a new snapshot of the data) sees its row.
func (s *Store) CreateSnapshot(ctx context.Context, snap snapshot.Snapshot, now time.Time) (out snapshot.Snapshot, existed bool, err error) {
	if err := snapshot.ValidName(snap.Name); err != nil {
		return snapshot.Snapshot{}, false, err
	}
	switch snap.Kind {
	case snapshot.KindImage, snapshot.KindRepo:
	default:
		return snapshot.Snapshot{}, false, fmt.Errorf("%w snapshot kind %q", snapshot.ErrInvalid, snap.Kind)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// A row deleted between the two statements frees the name: try again.
		for range 3 {
			out, err = scanSnapshot(tx.QueryRow(ctx, `INSERT INTO snapshots (name, kind, image_ref, digest, repo, codebase_id,
					external_id, commit_sha, base_image, state, created_at, updated_at)
				VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6::bigint, 0), nullif($7, ''), nullif($8, ''), $9, 'pending', $10, $10)
				ON CONFLICT (name) DO NOTHING
				RETURNING `+snapshotColumns,
				snap.Name, string(snap.Kind), snap.ImageRef, snap.Digest, snap.Repo, snap.CodebaseID,
				snap.ExternalID, snap.Commit, snap.BaseImage, now))
			if !errors.Is(err, pgx.ErrNoRows) {
				existed = false
				return err
			}
			out, err = scanSnapshot(tx.QueryRow(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE name = $1`, snap.Name))
			if !errors.Is(err, pgx.ErrNoRows) {
				existed = true
				return err
			}
		}
		return fmt.Errorf("snapshot %q keeps appearing and vanishing", snap.Name)
	})
	if err != nil {
		var pg *pgconn.PgError
		if errors.As(err, &pg) && pg.Code == "23503" {
			return snapshot.Snapshot{}, false, &notFoundError{fmt.Sprintf("create snapshot %q: codebase %d does not exist", snap.Name, snap.CodebaseID)}
		}
		return snapshot.Snapshot{}, false, fmt.Errorf("create snapshot %q: %w", snap.Name, err)
	}
	if existed && !out.SameSource(snap) {
		return snapshot.Snapshot{}, false, &snapshotExistsError{fmt.Sprintf("snapshot %q already exists %s; asked for one %s",
			snap.Name, describe(out), describe(snap))}
	}
	return out, existed, nil
}

// Snapshot returns a snapshot.
func (s *Store) Snapshot(ctx context.Context, name string) (snapshot.Snapshot, error) {
	out, err := scanSnapshot(s.pool.QueryRow(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return snapshot.Snapshot{}, snapshotMissing(name)
	}
	if err != nil {
		return snapshot.Snapshot{}, fmt.Errorf("snapshot %q: %w", name, err)
	}
	return out, nil
}

// Snapshots lists every snapshot, by name.
func (s *Store) Snapshots(ctx context.Context) ([]snapshot.Snapshot, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+snapshotColumns+` FROM snapshots ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (snapshot.Snapshot, error) { return scanSnapshot(row) })
}

// SetSnapshotState sets a snapshot's state; the reason is kept only with
// error, so that a recovered snapshot does not show a stale one.
func (s *Store) SetSnapshotState(ctx context.Context, name string, state snapshot.State, reason string, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE snapshots SET state = $2,
			error_reason = CASE WHEN $2 = 'error' THEN $3::text ELSE '' END, updated_at = $4
		WHERE name = $1 AND (state <> 'removing' OR $2 = 'removing')`, name, string(state), reason, now)
	if err != nil {
		return fmt.Errorf("set snapshot %q %s: %w", name, state, err)
	}
	if tag.RowsAffected() == 0 {
		// Missing, or being removed: a late propagation must not bring a
		// snapshot back from removal.
		if _, err := s.Snapshot(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// ActivateSnapshot makes a snapshot active once a first runner holds it,
// and reports whether this call did. Active already is not an error (every
// runner that becomes ready may ask); a snapshot being removed stays so.
func (s *Store) ActivateSnapshot(ctx context.Context, name string, now time.Time) (bool, error) {
	var changed bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE snapshots SET state = 'active', error_reason = '', updated_at = $2
			WHERE name = $1 AND state IN ('pending', 'pulling', 'building', 'error')`, name, now)
		if err != nil {
			return err
		}
		if changed = tag.RowsAffected() > 0; changed {
			return nil
		}
		return snapshotExists(ctx, tx, name)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, fmt.Errorf("activate snapshot %q: %w", name, err)
	}
	return changed, err
}

func snapshotExists(ctx context.Context, tx pgx.Tx, name string) error {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM snapshots WHERE name = $1)`, name).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return snapshotMissing(name)
	}
	return nil
}

// SetSnapshotImage records the digest a snapshot's image turned out to
// have and, for a build, the reference it pushed (an empty imageRef, or a
// snapshot that has one already, keeps the stored one). A snapshot is
// immutable: once a digest is recorded, a different one is an error, since
// runners that hold the first would silently differ from those that pull
// the second.
func (s *Store) SetSnapshotImage(ctx context.Context, name, imageRef, digest string, now time.Time) error {
	if digest == "" {
		return fmt.Errorf("%w: no digest to record for snapshot %q", snapshot.ErrInvalid, name)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var oldRef, oldDigest string
		err := tx.QueryRow(ctx, `SELECT image_ref, digest FROM snapshots WHERE name = $1 FOR UPDATE`, name).Scan(&oldRef, &oldDigest)
		if errors.Is(err, pgx.ErrNoRows) {
			return snapshotMissing(name)
		}
		if err != nil {
			return err
		}
		if oldDigest != "" && oldDigest != digest {
			return fmt.Errorf("snapshot %q is image %s, not %s: a snapshot never changes; create another name", name, oldDigest, digest)
		}
		if oldDigest == digest && (oldRef != "" || imageRef == "") {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE snapshots SET digest = $2,
				image_ref = CASE WHEN image_ref = '' THEN $3 ELSE image_ref END, updated_at = $4
			WHERE name = $1`, name, digest, imageRef, now)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("record image of snapshot %q: %w", name, err)
	}
	return err
}

// DeleteSnapshot deletes a snapshot and its rows; a snapshot already gone
// is not an error (the removal workflow may run it twice).
func (s *Store) DeleteSnapshot(ctx context.Context, name string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM snapshots WHERE name = $1`, name); err != nil {
		return fmt.Errorf("delete snapshot %q: %w", name, err)
	}
	return nil
}

// FinishSnapshotRemoval deletes a snapshot being removed once no runner
// has a row of it left, and reports whether it did (or it was gone).
func (s *Store) FinishSnapshotRemoval(ctx context.Context, name string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM snapshots WHERE name = $1 AND state = 'removing'
		AND NOT EXISTS (SELECT 1 FROM snapshot_runners WHERE snapshot_ref = $1)`, name)
	if err != nil {
		return false, fmt.Errorf("delete snapshot %q: %w", name, err)
	}
	if tag.RowsAffected() > 0 {
		return true, nil
	}
	_, err = s.Snapshot(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return true, nil
	}
	return false, err
}

// rowColumns are a row's columns; its version is the row version's xmin,
// which every write of the row changes.
const rowColumns = `runner_id, snapshot_ref, state, error_reason, bytes_done, bytes_total, source, retries, created_at, updated_at,
	xmin::text::bigint`

func scanRow(row pgx.Row) (snapshot.Row, error) {
	var r snapshot.Row
	err := row.Scan(&r.RunnerID, &r.SnapshotRef, &r.State, &r.ErrorReason, &r.BytesDone, &r.BytesTotal,
		&r.Source, &r.Retries, &r.CreatedAt, &r.UpdatedAt, &r.Version)
	return r, err
}

func collectRows(rows pgx.Rows, err error) ([]snapshot.Row, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (snapshot.Row, error) { return scanRow(row) })
}

// InsertSnapshotRunner puts a snapshot on a runner's list in state, unless
// it is there already, and returns the row either way: two propagations
// (or a retried activity) adding the same pair is expected, not an error.
// A runner that is not registered, or a snapshot that does not exist, is
// ErrNotFound.
func (s *Store) InsertSnapshotRunner(ctx context.Context, runnerID, ref string, state snapshot.RowState, now time.Time) (row snapshot.Row, inserted bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		row, err = scanRow(tx.QueryRow(ctx, `INSERT INTO snapshot_runners (runner_id, snapshot_ref, state, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4)
			ON CONFLICT ON CONSTRAINT snapshot_runners_pair DO NOTHING
			RETURNING `+rowColumns, runnerID, ref, string(state), now))
		inserted = err == nil
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		row, err = scanRow(tx.QueryRow(ctx, `SELECT `+rowColumns+` FROM snapshot_runners
			WHERE runner_id = $1 AND snapshot_ref = $2`, runnerID, ref))
		if errors.Is(err, pgx.ErrNoRows) {
			// Deleted between the two statements: as if never there.
			return fmt.Errorf("snapshot %q on runner %q was deleted while being added", ref, runnerID)
		}
		return err
	})
	var pg *pgconn.PgError
	switch {
	case err == nil:
		return row, inserted, nil
	case errors.As(err, &pg) && pg.ConstraintName == "snapshot_runners_runner":
		return snapshot.Row{}, false, runnerNotRegistered(runnerID)
	case errors.As(err, &pg) && pg.ConstraintName == "snapshot_runners_snapshot":
		return snapshot.Row{}, false, snapshotMissing(ref)
	}
	return snapshot.Row{}, false, fmt.Errorf("add snapshot %q to runner %q: %w", ref, runnerID, err)
}

// SnapshotRunner returns one runner's row of a snapshot.
func (s *Store) SnapshotRunner(ctx context.Context, runnerID, ref string) (snapshot.Row, error) {
	r, err := scanRow(s.pool.QueryRow(ctx, `SELECT `+rowColumns+` FROM snapshot_runners
		WHERE runner_id = $1 AND snapshot_ref = $2`, runnerID, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return snapshot.Row{}, rowMissing(runnerID, ref)
	}
	if err != nil {
		return snapshot.Row{}, fmt.Errorf("snapshot %q on runner %q: %w", ref, runnerID, err)
	}
	return r, nil
}

// SnapshotRunners lists a snapshot's rows, by runner id.
func (s *Store) SnapshotRunners(ctx context.Context, ref string) ([]snapshot.Row, error) {
	return collectRows(s.pool.Query(ctx, `SELECT `+rowColumns+` FROM snapshot_runners
		WHERE snapshot_ref = $1 ORDER BY runner_id`, ref))
}

// RunnerSnapshots lists a runner's rows, by snapshot name.
func (s *Store) RunnerSnapshots(ctx context.Context, runnerID string) ([]snapshot.Row, error) {
	return collectRows(s.pool.Query(ctx, `SELECT `+rowColumns+` FROM snapshot_runners
		WHERE runner_id = $1 ORDER BY snapshot_ref`, runnerID))
}

// TransitionSnapshotRunner moves a row to state to, but only from one of
// the states in from (any state when from is empty), so that a late or
// repeated report cannot undo a newer decision; it reports whether the row
// moved (false for a missing row too).
//
// The error reason is kept only with error. Ready resets the retry count
// (the backoff starts over) and completes the progress; leaving error for a
// pull or build counts a retry.
func (s *Store) TransitionSnapshotRunner(ctx context.Context, runnerID, ref string, from []snapshot.RowState, to snapshot.RowState, reason string, now time.Time) (bool, error) {
	fromStates := make([]string, len(from))
	for i, f := range from {
		fromStates[i] = string(f)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE snapshot_runners SET state = $3,
			error_reason = CASE WHEN $3 = 'error' THEN $5::text ELSE '' END,
			retries = CASE WHEN $3 = 'ready' THEN 0
				WHEN state = 'error' AND $3 IN ('pulling_snapshot', 'building_snapshot') THEN retries + 1
				ELSE retries END,
			bytes_done = CASE WHEN $3 = 'ready' THEN bytes_total ELSE bytes_done END,
			updated_at = $6
		WHERE runner_id = $1 AND snapshot_ref = $2 AND (cardinality($4::text[]) = 0 OR state = ANY($4::text[]))`,
		runnerID, ref, string(to), fromStates, reason, now)
	if err != nil {
		return false, fmt.Errorf("move snapshot %q on runner %q to %s: %w", ref, runnerID, to, err)
	}
	return tag.RowsAffected() > 0, nil
}

// FinishSnapshotPull moves a row from one of from to ready with what the
// pull recorded: its bytes and, when not empty, where they came from. The
// propagation writes them from the pull's result, so a pull that ended
// before the runner's own progress write landed (a fast pull, a slow
// database) still shows them. total 0 keeps the row's.
func (s *Store) FinishSnapshotPull(ctx context.Context, runnerID, ref string, from []snapshot.RowState, total int64, source string, now time.Time) (bool, error) {
	fromStates := make([]string, len(from))
	for i, f := range from {
		fromStates[i] = string(f)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE snapshot_runners SET state = 'ready', error_reason = '', retries = 0,
			bytes_total = CASE WHEN $4 > 0 THEN $4 ELSE bytes_total END,
			bytes_done = CASE WHEN $4 > 0 THEN $4 ELSE bytes_total END,
			source = coalesce(nullif($5, ''), source),
			progress_at = CASE WHEN $4 > 0 THEN $6 ELSE progress_at END,
			updated_at = $6
		WHERE runner_id = $1 AND snapshot_ref = $2 AND (cardinality($3::text[]) = 0 OR state = ANY($3::text[]))`,
		runnerID, ref, fromStates, total, source, now)
	if err != nil {
		return false, fmt.Errorf("move snapshot %q on runner %q to ready: %w", ref, runnerID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// PullAttempt names one attempt of a pull: the propagation run that
// scheduled it and "<activity id>/<attempt>".
type PullAttempt struct {
	RunID, Attempt, RunnerID, Snapshot string
}

// RecordPullBytes records what one attempt of a pull has received from
// each source so far (its running totals): a count only grows, so a late
// or repeated write (the runner's, then the propagation's with the
// attempt's result) never lowers it.
func (s *Store) RecordPullBytes(ctx context.Context, a PullAttempt, received map[string]int64) error {
	if len(received) == 0 {
		return nil
	}
	sources := make([]string, 0, len(received))
	counts := make([]int64, 0, len(received))
	for src, n := range received {
		if n > 0 {
			sources, counts = append(sources, src), append(counts, n)
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO snapshot_pull_bytes (run_id, attempt, source, runner_id, snapshot_ref, bytes)
		SELECT $1, $2, src, $3, $4, n FROM unnest($5::text[], $6::bigint[]) AS c (src, n)
		ON CONFLICT (run_id, attempt, source) DO UPDATE
			SET bytes = greatest(snapshot_pull_bytes.bytes, excluded.bytes), updated_at = now()
			WHERE excluded.bytes > snapshot_pull_bytes.bytes`,
		a.RunID, a.Attempt, a.RunnerID, a.Snapshot, sources, counts)
	if err != nil {
		return fmt.Errorf("bytes of the pull of snapshot %q on runner %q: %w", a.Snapshot, a.RunnerID, err)
	}
	return nil
}

// PullBytes sums what every attempt of a propagation run's pulls made the
// registry and the peers send.
func (s *Store) PullBytes(ctx context.Context, runID string) (registry, peers int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT coalesce(sum(bytes) FILTER (WHERE source = $2), 0)::bigint,
			coalesce(sum(bytes) FILTER (WHERE source <> $2), 0)::bigint
		FROM snapshot_pull_bytes WHERE run_id = $1`, runID, snapshot.Registry).Scan(&registry, &peers)
	if err != nil {
		return 0, 0, fmt.Errorf("bytes of propagation run %s: %w", runID, err)
	}
	return registry, peers, nil
}

// RetrySnapshotRows puts a snapshot's rows in error back to
// pulling_snapshot, whatever their reason (an operator asking again, e.g.
// after raising a quota): their window starts again now, and their count
// of automatic retries (which bounds a failed build's) from zero. It
// returns how many it moved.
func (s *Store) RetrySnapshotRows(ctx context.Context, ref string, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE snapshot_runners SET state = 'pulling_snapshot', error_reason = '', retries = 0, updated_at = $2
		WHERE snapshot_ref = $1 AND state = 'error'`, ref, now)
	if err != nil {
		return 0, fmt.Errorf("retry the rows of snapshot %q: %w", ref, err)
	}
	return int(tag.RowsAffected()), nil
}

// SetSnapshotRunnerProgress records how far a pull or build is. It leaves
// updated_at alone, since the pull window is measured from the last state
// change, and ignores a row no longer in flight (a late report). An empty
// source keeps the stored one.
func (s *Store) SetSnapshotRunnerProgress(ctx context.Context, runnerID, ref string, done, total int64, source string, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE snapshot_runners SET bytes_done = $3, bytes_total = $4,
			source = coalesce(nullif($5, ''), source), progress_at = $6
		WHERE runner_id = $1 AND snapshot_ref = $2 AND state IN ('pulling_snapshot', 'building_snapshot')`,
		runnerID, ref, done, total, source, now)
	if err != nil {
		return fmt.Errorf("progress of snapshot %q on runner %q: %w", ref, runnerID, err)
	}
	return nil
}

// DeleteSnapshotRunner deletes a row; a missing row is not an error.
func (s *Store) DeleteSnapshotRunner(ctx context.Context, runnerID, ref string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM snapshot_runners WHERE runner_id = $1 AND snapshot_ref = $2`, runnerID, ref)
	if err != nil {
		return fmt.Errorf("delete snapshot %q from runner %q: %w", ref, runnerID, err)
	}
	return nil
}

// MarkSnapshotRemoving starts a removal: the snapshot and every row of it
// become removing in one transaction, so no runner is left holding a ready
// copy of a snapshot being removed. It returns the rows, by runner id: the
// runners to tell.
func (s *Store) MarkSnapshotRemoving(ctx context.Context, name string, now time.Time) ([]snapshot.Row, error) {
	var rows []snapshot.Row
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// A second call (a retried activity) leaves the times of the first.
		tag, err := tx.Exec(ctx, `UPDATE snapshots SET state = 'removing', error_reason = '', updated_at = $2
			WHERE name = $1 AND state <> 'removing'`, name, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			if err := snapshotExists(ctx, tx, name); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE snapshot_runners SET state = 'removing', error_reason = '', updated_at = $2
			WHERE snapshot_ref = $1 AND state <> 'removing'`, name, now); err != nil {
			return err
		}
		rows, err = collectRows(tx.Query(ctx, `SELECT `+rowColumns+` FROM snapshot_runners
			WHERE snapshot_ref = $1 ORDER BY runner_id`, name))
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("remove snapshot %q: %w", name, err)
	}
	return rows, err
}

// ReadyRunners says where a snapshot is: the runners whose copy is ready,
// leaving out runners that are offline (they cannot serve it or run it),
// by id. Draining runners stay in: they keep what they hold.
func (s *Store) ReadyRunners(ctx context.Context, ref string) ([]snapshot.Runner, error) {
	return collectRunners(s.pool.Query(ctx, `SELECT r.id, r.peer_addr, r.capacity, r.quota_bytes, r.state, r.last_heartbeat, r.registered_at
		FROM snapshot_runners sr JOIN runners r ON r.id = sr.runner_id
		WHERE sr.snapshot_ref = $1 AND sr.state = 'ready' AND r.state <> 'offline'
		ORDER BY r.id`, ref))
}

// RowsInError lists every row in error, by runner and snapshot; the
// reconcile picks those to retry (snapshot.DueForRetry).
func (s *Store) RowsInError(ctx context.Context) ([]snapshot.Row, error) {
	return collectRows(s.pool.Query(ctx, `SELECT `+rowColumns+` FROM snapshot_runners
		WHERE state = 'error' ORDER BY runner_id, snapshot_ref`))
}

// The reconcile's pages (architecture §7). Names are compared and ordered
// byte by byte (COLLATE "C"), as a runner lists its store, whatever the
// database's collation: a page boundary means the same on both sides.

// ReconcileRunnerIDs lists the runners that are not offline with an id
// after after, at most limit, by id.
func (s *Store) ReconcileRunnerIDs(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM runners WHERE state <> 'offline' AND id COLLATE "C" > $1
		ORDER BY id COLLATE "C" LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("runners after %q: %w", after, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// RunnerRowsRange lists a runner's rows whose snapshot name is after after
// and, unless upto is empty, not after upto, at most limit, by name, with
// the digests their snapshots have.
func (s *Store) RunnerRowsRange(ctx context.Context, runnerID, after, upto string, limit int) ([]snapshot.Row, map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+qualified("sr", rowColumns)+`, sn.digest
		FROM snapshot_runners sr JOIN snapshots sn ON sn.name = sr.snapshot_ref
		WHERE sr.runner_id = $1 AND sr.snapshot_ref COLLATE "C" > $2 AND ($3 = '' OR sr.snapshot_ref COLLATE "C" <= $3)
		ORDER BY sr.snapshot_ref COLLATE "C" LIMIT $4`, runnerID, after, upto, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("rows of runner %q: %w", runnerID, err)
	}
	defer rows.Close()
	var out []snapshot.Row
	digests := map[string]string{}
	for rows.Next() {
		var r snapshot.Row
		var digest string
		if err := rows.Scan(&r.RunnerID, &r.SnapshotRef, &r.State, &r.ErrorReason, &r.BytesDone, &r.BytesTotal,
			&r.Source, &r.Retries, &r.CreatedAt, &r.UpdatedAt, &r.Version, &digest); err != nil {
			return nil, nil, fmt.Errorf("rows of runner %q: %w", runnerID, err)
		}
		out = append(out, r)
		if digest != "" {
			digests[r.SnapshotRef] = digest
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("rows of runner %q: %w", runnerID, err)
	}
	return out, digests, nil
}

// qualified prefixes each of a column list's columns with a table alias.
func qualified(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// RowsInErrorAfter lists the rows in error after the row (runnerID, ref),
// at most limit, by runner and snapshot.
func (s *Store) RowsInErrorAfter(ctx context.Context, runnerID, ref string, limit int) ([]snapshot.Row, error) {
	return collectRows(s.pool.Query(ctx, `SELECT `+rowColumns+` FROM snapshot_runners
		WHERE state = 'error' AND (runner_id COLLATE "C", snapshot_ref COLLATE "C") > ($1, $2)
		ORDER BY runner_id COLLATE "C", snapshot_ref COLLATE "C" LIMIT $3`, runnerID, ref, limit))
}

// RepullRows moves a runner's ready rows of the named snapshots back to
// pulling_snapshot (their images are gone) and returns the names it moved.
func (s *Store) RepullRows(ctx context.Context, runnerID string, refs []string, now time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `UPDATE snapshot_runners SET state = 'pulling_snapshot', error_reason = '', updated_at = $3
		WHERE runner_id = $1 AND snapshot_ref = ANY($2) AND state = 'ready' RETURNING snapshot_ref`, runnerID, refs, now)
	if err != nil {
		return nil, fmt.Errorf("pull again on runner %q: %w", runnerID, err)
	}
	moved, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pull again on runner %q: %w", runnerID, err)
	}
	slices.Sort(moved)
	return moved, nil
}

// RetryRowsInError moves the given rows, those still in error, back to
// pulling_snapshot in one statement (a retry: retries + 1, the reason
// cleared, the state change at now), and returns the rows it moved.
func (s *Store) RetryRowsInError(ctx context.Context, rows []snapshot.Row, now time.Time) ([]snapshot.Row, error) {
	runners := make([]string, len(rows))
	refs := make([]string, len(rows))
	for i, r := range rows {
		runners[i], refs[i] = r.RunnerID, r.SnapshotRef
	}
	moved, err := collectRows(s.pool.Query(ctx, `UPDATE snapshot_runners sr SET state = 'pulling_snapshot', error_reason = '',
			retries = sr.retries + 1, updated_at = $3
		FROM unnest($1::text[], $2::text[]) AS k(runner_id, snapshot_ref)
		WHERE sr.runner_id = k.runner_id AND sr.snapshot_ref = k.snapshot_ref AND sr.state = 'error'
		RETURNING `+qualified("sr", rowColumns), runners, refs, now))
	if err != nil {
		return nil, fmt.Errorf("retry rows in error: %w", err)
	}
	return moved, nil
}

// UnplacedSnapshots lists, after after and at most limit, by name, the
// snapshots a propagation must look at: active ones some eligible runner
// (ready, with a heartbeat within fresh of the database's now()) has no
// row for — a runner that joined since —, and those with a row waiting for
// a pull on an eligible runner — left while it was draining or briefly
// silent.
func (s *Store) UnplacedSnapshots(ctx context.Context, fresh time.Duration, after string, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		WITH eligible AS (
			SELECT id FROM runners WHERE state = 'ready' AND last_heartbeat >= now() - $1 * interval '1 microsecond'
		)
		SELECT sn.name FROM snapshots sn
		WHERE sn.name COLLATE "C" > $2 AND (
			(sn.state = 'active' AND EXISTS (SELECT 1 FROM eligible e WHERE NOT EXISTS (
				SELECT 1 FROM snapshot_runners sr WHERE sr.runner_id = e.id AND sr.snapshot_ref = sn.name)))
			OR EXISTS (SELECT 1 FROM snapshot_runners sr JOIN eligible e ON e.id = sr.runner_id
				WHERE sr.snapshot_ref = sn.name AND sr.state = 'pulling_snapshot'))
		ORDER BY sn.name COLLATE "C" LIMIT $3`, micros(fresh), after, limit)
	if err != nil {
		return nil, fmt.Errorf("snapshots to propagate: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
