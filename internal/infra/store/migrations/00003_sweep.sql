-- +goose NO TRANSACTION
-- Online (see doc.go, "Migrations"): the column is a catalog change and the
-- index is built concurrently, so codebases stays readable and writable.

-- +goose Up
-- When a cheap change check last found a repository unchanged: the sweep
-- counts it like a completed collection when deciding what is due.
ALTER TABLE codebases ADD COLUMN IF NOT EXISTS last_checked_at TIMESTAMPTZ;

-- The re-collection sweep's candidates: live codebases with fewer than five
-- failures in a row (decay.MaxFailures), keyset-paged by (last_viewed_at,
-- id) from the decay horizon on, so a sweep reads only the codebases people
-- looked at recently, however many are idle. A view during a sweep only
-- moves a codebase forward: it may be met twice, never skipped.
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS codebases_sweep ON codebases (last_viewed_at, id)
    WHERE NOT is_stale AND consecutive_failures < 5;
RESET lock_timeout;

-- +goose Down
DROP INDEX IF EXISTS codebases_sweep;
ALTER TABLE codebases DROP COLUMN IF EXISTS last_checked_at;
