-- +goose NO TRANSACTION
-- Online (see doc.go, "Migrations"): the index is built concurrently, so
-- codebases stays readable and writable, then the one it replaces dropped.

-- +goose Up
-- The sweep split into ranges (architecture §5, sweeprange): range k of n
-- reads the buckets [lo, hi) of (hashint8(id) & 1023). The bucket is the
-- index's third column, so a range's page is read in (last_viewed_at, id)
-- order with the other ranges' codebases skipped in the index, without a
-- heap fetch each. It replaces codebases_sweep (the same first columns and
-- predicate), which answers nothing this one does not.
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS codebases_sweep_ranged ON codebases (last_viewed_at, id, (hashint8(id) & 1023))
    WHERE NOT is_stale AND consecutive_failures < 5;
DROP INDEX CONCURRENTLY IF EXISTS codebases_sweep;
RESET lock_timeout;

-- +goose Down
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS codebases_sweep ON codebases (last_viewed_at, id)
    WHERE NOT is_stale AND consecutive_failures < 5;
DROP INDEX CONCURRENTLY IF EXISTS codebases_sweep_ranged;
RESET lock_timeout;
