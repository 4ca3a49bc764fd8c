-- +goose NO TRANSACTION
-- The reconcile reads the rows a page at a time (architecture §7): one
-- runner's in the byte order of the snapshot names, the order a runner
-- lists its store in whatever the database's collation (COLLATE "C"), and
-- the rows in error in (runner, snapshot) order. These indexes keep each
-- page a range scan however many rows the fleet holds.
--
-- Online (see doc.go, "Migrations"): built concurrently, so the table
-- stays readable and writable; a concurrent build only waits, blocking
-- nobody.

-- +goose Up
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS snapshot_runners_by_name ON snapshot_runners (runner_id, snapshot_ref COLLATE "C");
CREATE INDEX CONCURRENTLY IF NOT EXISTS snapshot_runners_in_error
    ON snapshot_runners (runner_id COLLATE "C", snapshot_ref COLLATE "C") WHERE state = 'error';
RESET lock_timeout;

-- +goose Down
DROP INDEX IF EXISTS snapshot_runners_in_error;
DROP INDEX IF EXISTS snapshot_runners_by_name;
