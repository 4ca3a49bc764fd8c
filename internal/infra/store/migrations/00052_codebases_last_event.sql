-- When a webhook delivery last named the codebase's repository (the
-- receiver sets it once the delivery is handed to Temporal): the sweep
-- checks a repository whose events arrive less often, since its pushes
-- are collected as they happen (architecture §5, "Push-time detection").
-- A nullable column without a default: no rewrite, nothing to do online.

-- +goose Up
SET lock_timeout = '5s';
ALTER TABLE codebases ADD COLUMN IF NOT EXISTS last_event_at TIMESTAMPTZ;
RESET lock_timeout;

-- +goose Down
ALTER TABLE codebases DROP COLUMN IF EXISTS last_event_at;
