-- Uploads of a repository's SARIF to GitHub code scanning (architecture
-- §8, "Where developers look: code scanning"), one row per attempt: what
-- was sent (the commit and ref, a digest of the results, how many were
-- open and dismissed), GitHub's id for it and its processing state
-- (pending, complete, failed), or why nothing was sent (not_sent). The
-- digest decides whether a collection uploads again; sent_at and account
-- bound the uploads per App installation. A new table: nothing to do
-- online.

-- +goose Up
SET lock_timeout = '5s';
CREATE TABLE IF NOT EXISTS code_scanning_uploads (
    id           BIGSERIAL   PRIMARY KEY,
    codebase_id  BIGINT      NOT NULL REFERENCES codebases (id) ON DELETE CASCADE,
    repository   TEXT        NOT NULL,
    account      TEXT        NOT NULL DEFAULT '',
    commit_sha   TEXT        NOT NULL DEFAULT '',
    ref          TEXT        NOT NULL DEFAULT '',
    digest       TEXT        NOT NULL DEFAULT '',
    open_results INT         NOT NULL DEFAULT 0,
    dismissed    INT         NOT NULL DEFAULT 0,
    sarif_id     TEXT        NOT NULL DEFAULT '',
    state        TEXT        NOT NULL,
    attempt      INT         NOT NULL DEFAULT 1,
    message      TEXT        NOT NULL DEFAULT '',
    sent_at      TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS code_scanning_uploads_codebase ON code_scanning_uploads (codebase_id, id DESC);
CREATE INDEX IF NOT EXISTS code_scanning_uploads_sent ON code_scanning_uploads (account, sent_at) WHERE sent_at IS NOT NULL;
RESET lock_timeout;

-- +goose Down
DROP TABLE IF EXISTS code_scanning_uploads;
