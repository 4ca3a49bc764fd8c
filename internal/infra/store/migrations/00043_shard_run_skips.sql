-- +goose Up
-- Catalog change only (a constant default: no rewrite, no scan); the
-- lock_timeout makes the migration fail (and be run again) rather than
-- queue every query of the table behind a long transaction.
SET LOCAL lock_timeout = '5s';

-- The breakdown of what the current scan's batches skipped, by reason
-- (shard.Counts.Breakdown: missing, binary, oversized, an archive's
-- skips...), summed key by key in the transaction of each batch like the
-- run_* counts of 00029: a retried or re-placed attempt reports the
-- breakdown of every attempt of the scan, not only its own. Reset when
-- the workflow claims the shard for a scan.
ALTER TABLE shards ADD COLUMN run_skips JSONB NOT NULL DEFAULT '{}';

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE shards DROP COLUMN run_skips;
