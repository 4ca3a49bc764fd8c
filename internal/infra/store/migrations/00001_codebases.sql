-- +goose Up
-- A codebase is one repository identity: (host, external_repo_id) per ADR-08.
-- Its owner/name move with renames and transfers; a name is held by at most
-- one live codebase at a time.
CREATE TABLE codebases (
    id                   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host                 TEXT        NOT NULL,
    -- A string for every host: GitHub BIGINT, GitLab INT, Bitbucket UUID.
    external_repo_id     VARCHAR(64) NOT NULL,
    owner                TEXT        NOT NULL,
    name                 TEXT        NOT NULL,
    default_branch       TEXT,
    last_commit_sha      TEXT,
    last_completed_at    TIMESTAMPTZ,
    last_viewed_at       TIMESTAMPTZ,
    consecutive_failures INTEGER     NOT NULL DEFAULT 0,
    -- Set when the repository no longer exists under this identity; kept 30
    -- days ("repository no longer exists"), then deleted with its history.
    stale_since          TIMESTAMPTZ,
    is_stale             BOOLEAN     GENERATED ALWAYS AS (stale_since IS NOT NULL) STORED,
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT codebases_external_id UNIQUE (host, external_repo_id)
);

-- GitHub compares names case-insensitively, so the live-name index does too.
CREATE UNIQUE INDEX codebases_live_name ON codebases (host, lower(owner), lower(name)) WHERE NOT is_stale;
CREATE INDEX codebases_stale_since ON codebases (stale_since) WHERE is_stale;

-- One row per collection attempt: the codebase's history.
CREATE TABLE collections (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Idempotency key (the Collect workflow run): a retried activity finds
    -- its own earlier write instead of writing twice.
    key              TEXT        NOT NULL UNIQUE,
    codebase_id      BIGINT      REFERENCES codebases (id) ON DELETE CASCADE,
    -- The repository as requested and as cloned, at the time.
    host             TEXT        NOT NULL,
    owner            TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    identity_case    TEXT        CHECK (identity_case IN ('A', 'B', 'D', 'E', 'F', 'R')),
    retired_codebase_id BIGINT   REFERENCES codebases (id) ON DELETE SET NULL,
    commit_sha       TEXT,
    status           TEXT        NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    error_class      TEXT,
    error_message    TEXT,
    workflow_id      TEXT        NOT NULL,
    run_id           TEXT        NOT NULL,
    started_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ
);
CREATE INDEX collections_codebase ON collections (codebase_id, started_at DESC);

-- +goose Down
DROP TABLE collections;
DROP TABLE codebases;
