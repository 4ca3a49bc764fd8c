-- +goose NO TRANSACTION
-- What an operator lists (`starter repos --parked`, `--excluded`): parked
-- shards, and live codebases the sweep no longer refreshes (failures in a
-- row at decay.MaxFailures). Few rows each, found without reading the
-- tables whole.
--
-- Online (see doc.go, "Migrations"): built concurrently, so the tables stay
-- readable and writable; a concurrent build only waits, blocking nobody.

-- +goose Up
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS shards_parked ON shards (id) WHERE status = 'Parked';
CREATE INDEX CONCURRENTLY IF NOT EXISTS codebases_excluded ON codebases (id)
    WHERE NOT is_stale AND consecutive_failures >= 5;
RESET lock_timeout;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS codebases_excluded;
DROP INDEX CONCURRENTLY IF EXISTS shards_parked;
