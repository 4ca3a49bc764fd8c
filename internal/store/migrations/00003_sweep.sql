-- +goose Up
-- When a cheap change check last found a repository unchanged: the sweep
-- counts it like a completed collection when deciding what is due.
ALTER TABLE codebases ADD COLUMN last_checked_at TIMESTAMPTZ;

-- The re-collection sweep's candidate query pages through live codebases
-- with fewer than five failures in a row (decay.MaxFailures) by id; the
-- included columns let it decide from the index alone.
CREATE INDEX codebases_sweep ON codebases (id)
    INCLUDE (last_viewed_at, last_completed_at, last_checked_at)
    WHERE NOT is_stale AND consecutive_failures < 5;

-- +goose Down
DROP INDEX codebases_sweep;
ALTER TABLE codebases DROP COLUMN last_checked_at;
