package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The cleanup deletes what is no longer wanted — codebases stale for long
// enough, and what retention lets go — in steps small enough that none
// holds locks or a transaction for long, however much there is: a stale
// codebase may hold millions of seen blobs and findings, which one DELETE
// cascading through them would hold in one transaction (it used to, and
// at scale timed out and rolled back every day).
//
// A shard to delete is first renamed 'purge:<id>' and, for a codebase's,
// detached from it, in the short transaction that decides it; its rows
// then go table by table, a batch per statement, the scope and shard rows
// last. The rename frees the key at once: a scan request or a codebase
// that comes back gets a shard of its own, never a half-deleted one.
//
// Within a scope the watermarks go first and seen blobs before findings,
// so that whatever is left is consistent: a blob still marked seen still
// has its findings, and a scope used again (a rule set restored) rescans
// what it lost.

// deletableStale is which codebases the stale cleanup deletes ($1: stale
// since before this): every other decision of the cleanup is how, not
// which.
const deletableStale = `is_stale AND stale_since < $1`

// DeleteStale deletes up to limit codebases stale since before cutoff in
// one short transaction, with their collection history, renames their
// shards for the purge (CleanupStep deletes their data in batches) and
// returns how many codebases it deleted.
func (s *Store) DeleteStale(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `SELECT id FROM codebases WHERE `+deletableStale+`
			ORDER BY stale_since, id LIMIT $2 FOR UPDATE SKIP LOCKED`, cutoff, limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE shards SET key = 'purge:' || id, codebase_id = NULL, updated_at = now()
			WHERE codebase_id = ANY($1)`, ids); err != nil {
			return err
		}
		// Their secrets' triage goes with them, as their history does.
		subjects := make([]string, len(ids))
		for i, id := range ids {
			subjects[i] = fmt.Sprintf("codebase:%d", id)
		}
		for _, table := range []string{"secret_state_history", "secret_states"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE subject = ANY($1)`, subjects); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM codebases WHERE id = ANY($1)`, ids)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// Retention says how long what is no longer current is kept; zero keeps
// it forever.
type Retention struct {
	// Collections is how long the collection history is kept (a row per
	// attempt); the newest collection of each name a codebase was
	// collected under stays, so its former names do.
	Collections time.Duration
	// Receipts is how long scan receipts are kept (one per run); the one
	// each shard is checkpointed at stays, and the current run's.
	Receipts time.Duration
	// OldScopes is how long a shard's results under a rule set are kept
	// after a newer rule set's scope began (their seen blobs, findings and
	// watermarks); the scope of the shard's checkpoint stays.
	OldScopes time.Duration
	// Scans is how long a scan request's shard (target:) and its results
	// are kept after its last use; a new request then scans afresh.
	Scans time.Duration
}

// CleanupPlan is one cleanup: what goes, and how much at a time.
type CleanupPlan struct {
	// StaleBefore: codebases stale since before it are deleted with all
	// they hold (zero: none).
	StaleBefore time.Time
	// Now is retention's clock.
	Now       time.Time
	Retention Retention
	// Batch is the most rows one statement deletes (default 5,000) and
	// Codebases the most codebases one transaction deletes (default 100).
	Batch, Codebases int
}

// CleanupCounts count what a cleanup deleted. Rows are the data rows of
// shards and scopes: watermarks, holes, seen blobs (a chunk of them is
// one row), findings, their paths and presence. Packed are the rows of
// seen_blobs written before migration 00058 that went into chunks: moved,
// not deleted.
type CleanupCounts struct {
	Codebases, Shards, Scopes, Collections, Receipts, Rows int64
	Packed                                                 int64 `json:",omitempty"`
}

// Add adds o to r.
func (r *CleanupCounts) Add(o CleanupCounts) {
	r.Codebases += o.Codebases
	r.Shards += o.Shards
	r.Scopes += o.Scopes
	r.Collections += o.Collections
	r.Receipts += o.Receipts
	r.Rows += o.Rows
	r.Packed += o.Packed
}

// Total is every row deleted.
func (r CleanupCounts) Total() int64 {
	return r.Codebases + r.Shards + r.Scopes + r.Collections + r.Receipts + r.Rows
}

// CleanupCursor is how far a cleanup has come: the phase it is in and,
// for the phases that walk a table, the last id they read. The zero value
// starts from the beginning; every phase reads what is left from the
// database, so a lost cursor costs reading again, never a wrong delete.
type CleanupCursor struct {
	Phase int   `json:"phase"`
	After int64 `json:"after,omitempty"`
}

// The phases, in order: those that mark shards for the purge come before
// the purge.
const (
	phaseStale = iota
	phaseScans
	phasePurge
	phaseOldScopes
	phaseCollections
	phaseReceipts
	// Last, and whatever the retention: the rows of seen_blobs from before
	// migration 00058 go into chunks, a batch a step (packLegacyStep).
	phasePack
	phases
)

// CleanupStep does one bounded piece of a cleanup — one statement or one
// short transaction — and returns what it deleted and where the cleanup
// stands; done when nothing is left. Call it with the cursor it returned
// until done; stopping anywhere leaves the database consistent.
func (s *Store) CleanupStep(ctx context.Context, p CleanupPlan, c CleanupCursor) (CleanupCounts, CleanupCursor, bool, error) {
	if p.Batch <= 0 {
		p.Batch = 5000
	}
	if p.Codebases <= 0 {
		p.Codebases = 100
	}
	for ; c.Phase < phases; c = (CleanupCursor{Phase: c.Phase + 1}) {
		var r CleanupCounts
		var renamed int64
		var err error
		after := c.After
		switch c.Phase {
		case phaseStale:
			if !p.StaleBefore.IsZero() {
				r.Codebases, err = s.DeleteStale(ctx, p.StaleBefore, p.Codebases)
			}
		case phaseScans:
			if p.Retention.Scans > 0 {
				renamed, err = s.retireScans(ctx, p.Now.Add(-p.Retention.Scans), p.Codebases)
			}
		case phasePurge:
			err = s.purgeStep(ctx, p.Batch, &r)
		case phaseOldScopes:
			if p.Retention.OldScopes > 0 {
				after, err = s.oldScopeStep(ctx, p.Now.Add(-p.Retention.OldScopes), c.After, p.Batch, &r)
			}
		case phaseCollections:
			if p.Retention.Collections > 0 {
				after, err = s.oldCollections(ctx, p.Now.Add(-p.Retention.Collections), c.After, p.Batch, &r)
			}
		case phaseReceipts:
			if p.Retention.Receipts > 0 {
				after, err = s.oldReceipts(ctx, p.Now.Add(-p.Retention.Receipts), c.After, p.Batch, &r)
			}
		case phasePack:
			after, r.Packed, err = s.packLegacyStep(ctx, c.After, p.Batch)
		}
		if err != nil {
			return r, c, false, fmt.Errorf("cleanup: %w", err)
		}
		if r.Total() > 0 || r.Packed > 0 || renamed > 0 || after != c.After {
			c.After = after
			return r, c, false, nil
		}
	}
	return CleanupCounts{}, c, true, nil
}

// retireScans renames up to limit shards of scan requests unused since
// before cutoff for the purge, which deletes (and counts) them.
// Their secrets' triage (keyed by the key they had) goes with them.
func (s *Store) retireScans(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `WITH r AS (SELECT id, key FROM shards WHERE key LIKE 'target:%' AND updated_at < $1
				AND (lease_deadline IS NULL OR lease_deadline < $1) ORDER BY updated_at LIMIT $2 FOR UPDATE),
			u AS (UPDATE shards s SET key = 'purge:' || s.id, updated_at = now() FROM r WHERE s.id = r.id RETURNING r.key),
			h AS (DELETE FROM secret_state_history WHERE subject IN (SELECT key FROM u)),
			d AS (DELETE FROM secret_states WHERE subject IN (SELECT key FROM u))
		SELECT count(*) FROM u`, cutoff, limit).Scan(&n)
	return n, err
}

// purgeStep deletes one batch of the first shard renamed for the purge:
// from its first scope, or the shard itself once it has none.
func (s *Store) purgeStep(ctx context.Context, batch int, r *CleanupCounts) error {
	var shardID int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM shards WHERE key LIKE 'purge:%' ORDER BY id LIMIT 1`).Scan(&shardID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var scopeID int64
	err = s.pool.QueryRow(ctx, `SELECT id FROM scan_scopes WHERE shard_id = $1 ORDER BY id LIMIT 1`, shardID).Scan(&scopeID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		tag, err := s.pool.Exec(ctx, `DELETE FROM shards WHERE id = $1 AND key LIKE 'purge:%'`, shardID)
		r.Shards += tag.RowsAffected()
		return err
	case err != nil:
		return err
	}
	return s.purgeScopeStep(ctx, scopeID, batch, r)
}

// scopeTables are the tables of a scope's rows, in the order they go.
var scopeTables = []string{"shard_watermarks", "shard_holes", "seen_blob_chunks", "seen_blobs", "findings", "secrets", "finding_paths",
	"finding_presence", "finding_presence_refs", "shard_receipts"}

// purgeScopeStep deletes one batch of a scope's rows from the first table
// that has any, or the scope itself once none has.
func (s *Store) purgeScopeStep(ctx context.Context, scopeID int64, batch int, r *CleanupCounts) error {
	for _, table := range scopeTables {
		// Each table's index leads with scope_id; the rows go by their
		// physical address, found through it.
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+table+` WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM `+table+` WHERE scope_id = $1 LIMIT $2))`, scopeID, batch)
		if err != nil {
			return fmt.Errorf("%s of scope %d: %w", table, scopeID, err)
		}
		if n := tag.RowsAffected(); n > 0 {
			if table == "shard_receipts" {
				r.Receipts += n
			} else {
				r.Rows += n
			}
			return nil
		}
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM scan_scopes WHERE id = $1`, scopeID)
	r.Scopes += tag.RowsAffected()
	return err
}

// oldScopeStep deletes one batch of the first scope after the cursor that
// a newer scope of its shard replaced before cutoff, unless the shard is
// checkpointed at it. It returns the new cursor: the scope it worked on
// (it comes back to it until the scope is gone), or the last it read.
func (s *Store) oldScopeStep(ctx context.Context, cutoff time.Time, after int64, batch int, r *CleanupCounts) (int64, error) {
	var scopeID int64
	err := s.pool.QueryRow(ctx, `SELECT o.id FROM scan_scopes o JOIN shards s ON s.id = o.shard_id
		WHERE o.id >= $2 AND s.key NOT LIKE 'purge:%'
			AND EXISTS (SELECT 1 FROM scan_scopes n WHERE n.shard_id = o.shard_id AND n.id > o.id AND n.created_at < $1)
			AND NOT EXISTS (SELECT 1 FROM shard_receipts c WHERE c.id = s.checkpoint_receipt_id AND c.scope_id = o.id)
		ORDER BY o.id LIMIT 1`, cutoff, after).Scan(&scopeID)
	if errors.Is(err, pgx.ErrNoRows) {
		return after, nil
	}
	if err != nil {
		return after, err
	}
	return scopeID, s.purgeScopeStep(ctx, scopeID, batch, r)
}

// oldCollections deletes a batch of collections started before cutoff, in
// id order from the cursor, but for the newest of each name a codebase was
// collected under (its former names, CodebaseByFormerName).
func (s *Store) oldCollections(ctx context.Context, cutoff time.Time, after int64, batch int, r *CleanupCounts) (int64, error) {
	return s.deleteWalking(ctx, `collections`, `SELECT c.id FROM collections c
		WHERE c.id > $2 AND c.started_at < $1
			AND (c.codebase_id IS NULL OR EXISTS (SELECT 1 FROM collections n
				WHERE n.host = c.host AND lower(n.owner) = lower(c.owner) AND lower(n.name) = lower(c.name)
					AND n.codebase_id = c.codebase_id AND (n.started_at, n.id) > (c.started_at, c.id)))
		ORDER BY c.id LIMIT $3`, cutoff, after, batch, &r.Collections)
}

// oldReceipts deletes a batch of receipts written before cutoff, in id
// order from the cursor, but for the one each shard is checkpointed at and
// those of a shard's current fence (a finalize retried returns its
// receipt).
func (s *Store) oldReceipts(ctx context.Context, cutoff time.Time, after int64, batch int, r *CleanupCounts) (int64, error) {
	return s.deleteWalking(ctx, `shard_receipts`, `SELECT r.id FROM shard_receipts r JOIN shards s ON s.id = r.shard_id
		WHERE r.id > $2 AND r.created_at < $1
			AND s.checkpoint_receipt_id IS DISTINCT FROM r.id AND s.fence <> r.fence
		ORDER BY r.id LIMIT $3`, cutoff, after, batch, &r.Receipts)
}

// deleteWalking deletes from table the ids pick returns (pick: $1 cutoff,
// $2 cursor, $3 limit, in id order) and returns the last id as the cursor.
func (s *Store) deleteWalking(ctx context.Context, table, pick string, cutoff time.Time, after int64, batch int, n *int64) (int64, error) {
	var last int64
	err := s.pool.QueryRow(ctx, `WITH picked AS (`+pick+`), gone AS (
			DELETE FROM `+table+` WHERE id IN (SELECT id FROM picked) RETURNING id)
		SELECT coalesce(max(id), 0), (SELECT count(*) FROM gone) FROM picked`, cutoff, after, batch).Scan(&last, n)
	if err != nil || last == 0 {
		return after, err
	}
	return last, nil
}
