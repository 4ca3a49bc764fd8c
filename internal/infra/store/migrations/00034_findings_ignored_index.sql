-- +goose NO TRANSACTION
-- Online (see doc.go, "Migrations"): built concurrently.

-- +goose Up
-- The suppressed findings of a scope: each finalize clears the marks of a
-- .gitleaksignore that no longer names them, and the views count them,
-- without reading the scope's other findings.
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS findings_ignored ON findings (scope_id) WHERE ignored <> '';
RESET lock_timeout;

-- +goose Down
DROP INDEX IF EXISTS findings_ignored;
