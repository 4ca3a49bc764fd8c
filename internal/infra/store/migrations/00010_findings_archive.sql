-- +goose Up
-- Where in an archive a finding's secret is: the path of the file inside
-- the blob, nested archives joined with '!' ('lib/app.jar!config/app.env'),
-- empty for a secret in the blob itself. Line and offsets are then the
-- file's.
ALTER TABLE findings ADD COLUMN archive TEXT NOT NULL DEFAULT '';

-- Two files of one archive may hold a finding of one rule at one offset:
-- an occurrence is also keyed by its file in the archive.
ALTER TABLE findings DROP CONSTRAINT findings_scope_id_blob_rule_id_start_offset_key;
ALTER TABLE findings ADD CONSTRAINT findings_occurrence UNIQUE (scope_id, blob, archive, rule_id, start_offset);

-- A path-only rule's secret is the file it matched: in an archive, the file
-- in it. (A generated column's expression cannot be altered: it is made
-- anew, and so is the index on it.)
DROP INDEX findings_by_secret;
ALTER TABLE findings DROP COLUMN secret_path;
ALTER TABLE findings ADD COLUMN secret_path TEXT NOT NULL
    GENERATED ALWAYS AS (CASE WHEN secret_hash <> '' THEN ''
        WHEN archive = '' THEN path ELSE path || '!' || archive END) STORED;
CREATE INDEX findings_by_secret ON findings (scope_id, rule_id, secret_hash, secret_path, id);

-- +goose Down
-- Findings inside archives have no place in the older table.
DELETE FROM findings WHERE archive <> '';
DROP INDEX findings_by_secret;
ALTER TABLE findings DROP COLUMN secret_path;
ALTER TABLE findings ADD COLUMN secret_path TEXT NOT NULL
    GENERATED ALWAYS AS (CASE WHEN secret_hash = '' THEN path ELSE '' END) STORED;
CREATE INDEX findings_by_secret ON findings (scope_id, rule_id, secret_hash, secret_path, id);
ALTER TABLE findings DROP CONSTRAINT findings_occurrence;
ALTER TABLE findings ADD CONSTRAINT findings_scope_id_blob_rule_id_start_offset_key UNIQUE (scope_id, blob, rule_id, start_offset);
ALTER TABLE findings DROP COLUMN archive;
