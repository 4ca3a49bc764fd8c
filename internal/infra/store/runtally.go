package store

import (
	"context"

	"gitfleet/internal/domain/shard"
)

// Tally is what a scan's batches made durable: blobs scanned and
// skipped, their bytes, and the new secrets found (see migration 00029),
// and the skips by reason (shard.Counts.Breakdown, migration 00043).
type Tally struct {
	Scanned, Skipped, Bytes, Findings int64
	Skips                             map[string]int64
}

// ResetRunTally starts a scan's tally afresh: the first attempt of a scan
// calls it, under its lease.
func (s *Store) ResetRunTally(ctx context.Context, l shard.Lease) error {
	_, err := s.pool.Exec(ctx, `UPDATE shards SET run_scanned = 0, run_skipped = 0, run_bytes = 0, run_findings = 0,
			run_skips = '{}' WHERE id = $1 AND fence = $2`, l.ShardID, l.Fence)
	return err
}

// RunTally is what the scan's earlier attempts made durable: a retried
// attempt reads it once it holds the lease (its new fence keeps the
// attempts it replaces from adding to it).
func (s *Store) RunTally(ctx context.Context, shardID int64) (Tally, error) {
	var t Tally
	err := s.pool.QueryRow(ctx, `SELECT run_scanned, run_skipped, run_bytes, run_findings, run_skips FROM shards WHERE id = $1`,
		shardID).Scan(&t.Scanned, &t.Skipped, &t.Bytes, &t.Findings, &t.Skips)
	return t, err
}

// OversizedBlobs counts the scope's blobs skipped as oversized, by this
// run or earlier ones (migration 00030 indexes them).
func (s *Store) OversizedBlobs(ctx context.Context, scopeID int64) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM seen_blobs WHERE scope_id = $1 AND outcome = 'oversized'`, scopeID).Scan(&n)
	return n, err
}

// addSkips is the SQL of run_skips plus $6 (a Breakdown), key by key.
const addSkips = `(SELECT coalesce(jsonb_object_agg(k, coalesce((run_skips->>k)::bigint, 0) + coalesce(($6::jsonb->>k)::bigint, 0)), '{}')
	FROM (SELECT jsonb_object_keys(run_skips) UNION SELECT jsonb_object_keys($6::jsonb)) AS t(k))`
