-- +goose Up
-- Findings per secret (rule + keyed hash) rather than per blob version: the
-- grouping index, and where each secret still stands at the latest tips.

-- A path-only rule (no regex) reports files, with no secret and no hash:
-- each path it matches is a secret of its own.
ALTER TABLE findings ADD COLUMN secret_path TEXT NOT NULL
    GENERATED ALWAYS AS (CASE WHEN secret_hash = '' THEN path ELSE '' END) STORED;

-- A secret's occurrences in the order they were found (id order).
CREATE INDEX findings_by_secret ON findings (scope_id, rule_id, secret_hash, secret_path, id);

-- Presence: at each Complete finalize, for every selected ref's tip, the
-- blobs holding findings that the tip's tree holds. A ref whose tip did not
-- move since the last computation keeps its rows (a blob first found later
-- cannot be in a tree whose every blob had been seen by then).
CREATE TABLE finding_presence_refs (
    scope_id  BIGINT NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    ref       TEXT   NOT NULL,
    commit_id TEXT   NOT NULL,
    PRIMARY KEY (scope_id, ref)
);

CREATE TABLE finding_presence (
    scope_id  BIGINT NOT NULL,
    ref       TEXT   NOT NULL,
    blob      BYTEA  NOT NULL,
    PRIMARY KEY (scope_id, blob, ref),
    FOREIGN KEY (scope_id, ref) REFERENCES finding_presence_refs (scope_id, ref) ON DELETE CASCADE
);
CREATE INDEX finding_presence_ref ON finding_presence (scope_id, ref);

-- The newest finding (id) the last presence computation decided; a finding
-- above it (or any, while NULL) is of unknown presence until the next
-- Complete scan.
ALTER TABLE scan_scopes ADD COLUMN presence_upto BIGINT;

-- From here on shard_receipts.findings counts new secrets (a rule and keyed
-- hash not seen before in the scope), not new rows.

-- +goose Down
ALTER TABLE scan_scopes DROP COLUMN presence_upto;
DROP TABLE finding_presence;
DROP TABLE finding_presence_refs;
DROP INDEX findings_by_secret;
ALTER TABLE findings DROP COLUMN secret_path;
