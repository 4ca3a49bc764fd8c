-- +goose Up
-- Catalog change only (constant defaults: no rewrite, no scan); the
-- lock_timeout makes the migration fail (and be run again) rather than
-- queue every query of the table behind a long transaction.
SET LOCAL lock_timeout = '5s';

-- What the current scan (a pass of an owner) has made durable so far,
-- counted in the transaction of each batch: a retried attempt (a worker
-- died mid-scan) reports the scan's totals, its predecessors' batches
-- included, not only what it scanned itself. Reset by the first attempt
-- of each scan.
ALTER TABLE shards ADD COLUMN run_scanned BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN run_skipped BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN run_bytes BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN run_findings BIGINT NOT NULL DEFAULT 0;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE shards DROP COLUMN run_scanned, DROP COLUMN run_skipped, DROP COLUMN run_bytes, DROP COLUMN run_findings;
