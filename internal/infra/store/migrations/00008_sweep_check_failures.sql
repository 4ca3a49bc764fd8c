-- +goose Up
-- The sweep whose change check last counted a failure against the codebase
-- (workflow id and first run id): a check is retried, and may be repeated
-- by the retry, but counts once per sweep.
ALTER TABLE codebases ADD COLUMN check_failed_sweep TEXT;

-- +goose Down
ALTER TABLE codebases DROP COLUMN check_failed_sweep;
