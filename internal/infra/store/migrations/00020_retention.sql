-- +goose NO TRANSACTION
-- What the daily cleanup's retention reads (store/cleanup.go): collections
-- and receipts by age, scan requests' shards by their last use, and the
-- shards it is deleting in batches (their key renamed 'purge:<id>').
--
-- Online (see doc.go, "Migrations"): built concurrently.

-- +goose Up
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS collections_started_at ON collections (started_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS shard_receipts_created_at ON shard_receipts (created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS shards_scan_used ON shards (updated_at) WHERE key LIKE 'target:%';
CREATE INDEX CONCURRENTLY IF NOT EXISTS shards_purge ON shards (id) WHERE key LIKE 'purge:%';
RESET lock_timeout;

-- +goose Down
DROP INDEX IF EXISTS shards_purge;
DROP INDEX IF EXISTS shards_scan_used;
DROP INDEX IF EXISTS shard_receipts_created_at;
DROP INDEX IF EXISTS collections_started_at;
