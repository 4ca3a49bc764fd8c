-- +goose NO TRANSACTION
-- Online (see doc.go, "Migrations"): findings is the largest table, so it
-- is never rewritten and keeps taking reads and writes: the new column is a
-- catalog change, the new unique index is built concurrently and then
-- takes over the constraint. Every statement can run again after an
-- interruption. (As first written, this migration re-created the stored
-- generated column secret_path, which rewrote findings under an exclusive
-- lock.)

-- +goose Up
-- Where in an archive a finding's secret is: the path of the file inside
-- the blob, nested archives joined with '!' ('lib/app.jar!config/app.env'),
-- empty for a secret in the blob itself. Line and offsets are then the
-- file's.
ALTER TABLE findings ADD COLUMN IF NOT EXISTS archive TEXT NOT NULL DEFAULT '';

-- A path-only rule's secret is the file it matched, in an archive the file
-- in it ('dist/app.jar!config/app.env'): the application writes
-- secret_path. An installation that ran migration 00006 as first written
-- has it as a stored generated column; it becomes a plain column keeping
-- its values (a catalog change: every row before this migration is in no
-- archive, so its value stays right).
ALTER TABLE findings ALTER COLUMN secret_path DROP EXPRESSION IF EXISTS;

-- Two files of one archive may hold a finding of one rule at one offset:
-- an occurrence is also keyed by its file in the archive.
SET lock_timeout = 0;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS findings_occurrence ON findings (scope_id, blob, archive, rule_id, start_offset);
RESET lock_timeout;
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'findings'::regclass AND conname = 'findings_occurrence') THEN
        ALTER TABLE findings DROP CONSTRAINT IF EXISTS findings_scope_id_blob_rule_id_start_offset_key,
            ADD CONSTRAINT findings_occurrence UNIQUE USING INDEX findings_occurrence;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
-- Findings inside archives have no place in the older table.
DELETE FROM findings WHERE archive <> '';
ALTER TABLE findings DROP CONSTRAINT findings_occurrence;
ALTER TABLE findings ADD CONSTRAINT findings_scope_id_blob_rule_id_start_offset_key UNIQUE (scope_id, blob, rule_id, start_offset);
ALTER TABLE findings DROP COLUMN archive;
