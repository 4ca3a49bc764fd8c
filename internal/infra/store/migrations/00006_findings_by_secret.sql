-- +goose NO TRANSACTION
-- Findings per secret (rule + keyed hash) rather than per blob version: the
-- grouping index, and where each secret still stands at the latest tips.
--
-- Online (see doc.go, "Migrations"): findings is the largest table, so it
-- is never rewritten (no stored generated column: secret_path is a plain
-- column the application writes), its backfill runs in committed batches,
-- and its index is built concurrently. Every statement can run again after
-- an interruption. An installation that ran this migration as it was first
-- written has secret_path as a stored generated column: migration 00010
-- makes it a plain one.

-- +goose Up
-- A path-only rule (no regex) reports files, with no secret and no hash:
-- each path it matches is a secret of its own, secret_path holds it ('' for
-- a secret with a hash). The default fills the rows already there without
-- rewriting the table, and is dropped: every insert says it.
ALTER TABLE findings ADD COLUMN IF NOT EXISTS secret_path TEXT NOT NULL DEFAULT '';

-- Presence: at each Complete finalize, for every selected ref's tip, the
-- blobs holding findings that the tip's tree holds. A ref whose tip did not
-- move since the last computation keeps its rows (a blob first found later
-- cannot be in a tree whose every blob had been seen by then).
CREATE TABLE IF NOT EXISTS finding_presence_refs (
    scope_id  BIGINT NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    ref       TEXT   NOT NULL,
    commit_id TEXT   NOT NULL,
    PRIMARY KEY (scope_id, ref)
);

CREATE TABLE IF NOT EXISTS finding_presence (
    scope_id  BIGINT NOT NULL,
    ref       TEXT   NOT NULL,
    blob      BYTEA  NOT NULL,
    PRIMARY KEY (scope_id, blob, ref),
    FOREIGN KEY (scope_id, ref) REFERENCES finding_presence_refs (scope_id, ref) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS finding_presence_ref ON finding_presence (scope_id, ref);

-- The newest finding (id) the last presence computation decided; a finding
-- above it (or any, while NULL) is of unknown presence until the next
-- Complete scan.
ALTER TABLE scan_scopes ADD COLUMN IF NOT EXISTS presence_upto BIGINT;

-- The path-only findings written before: their path is their secret.
-- +goose StatementBegin
DO $$
DECLARE
    lo   BIGINT := 0;
    last BIGINT := (SELECT coalesce(max(id), 0) FROM findings);
BEGIN
    WHILE lo < last LOOP
        UPDATE findings SET secret_path = path
            WHERE id > lo AND id <= lo + 10000 AND secret_hash = '' AND secret_path = '';
        lo := lo + 10000;
        COMMIT;
    END LOOP;
END $$;
-- +goose StatementEnd
ALTER TABLE findings ALTER COLUMN secret_path DROP DEFAULT;

-- A secret's occurrences in the order they were found (id order).
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS findings_by_secret ON findings (scope_id, rule_id, secret_hash, secret_path, id);
RESET lock_timeout;

-- From here on shard_receipts.findings counts new secrets (a rule and keyed
-- hash not seen before in the scope), not new rows.

-- +goose Down
ALTER TABLE scan_scopes DROP COLUMN presence_upto;
DROP TABLE finding_presence;
DROP TABLE finding_presence_refs;
DROP INDEX findings_by_secret;
ALTER TABLE findings DROP COLUMN secret_path;
