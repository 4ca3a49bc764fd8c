-- +goose Up
-- gitfleet's users and what GitHub says each of them can see (DESIGN §6).
-- A user's token is stored sealed (AES-GCM, key outside the database),
-- never in plain text.
CREATE TABLE users (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           TEXT        NOT NULL UNIQUE,
    -- The GitHub (Enterprise) API the token belongs to, and who it is there.
    api_url        TEXT        NOT NULL,
    github_login   TEXT        NOT NULL,
    github_user_id BIGINT      NOT NULL,
    token_sealed   BYTEA       NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Organizations are global: one row per GitHub organization, whoever sees it.
CREATE TABLE github_organizations (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    api_url       TEXT        NOT NULL,
    github_org_id BIGINT      NOT NULL,
    login         TEXT        NOT NULL,
    description   TEXT        NOT NULL DEFAULT '',
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT github_organizations_id UNIQUE (api_url, github_org_id)
);

CREATE TABLE user_github_org_memberships (
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    org_id  BIGINT NOT NULL REFERENCES github_organizations (id) ON DELETE CASCADE,
    PRIMARY KEY (user_id, org_id)
);

-- Per user: the same repository seen by two users is two rows, so one
-- user's view never leaks into another's.
CREATE TABLE user_github_repositories (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id        BIGINT      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    github_repo_id BIGINT      NOT NULL,
    owner          TEXT        NOT NULL,
    name           TEXT        NOT NULL,
    source_type    TEXT        NOT NULL CHECK (source_type IN ('personal', 'organization')),
    org_id         BIGINT      REFERENCES github_organizations (id) ON DELETE SET NULL,
    visibility     TEXT        NOT NULL,
    default_branch TEXT        NOT NULL DEFAULT '',
    archived       BOOLEAN     NOT NULL DEFAULT false,
    fork           BOOLEAN     NOT NULL DEFAULT false,
    pushed_at      TIMESTAMPTZ,
    CONSTRAINT user_github_repositories_repo UNIQUE (user_id, github_repo_id)
);
CREATE INDEX user_github_repositories_owner ON user_github_repositories (user_id, lower(owner), lower(name));

-- The lists a user's cache holds and when each was last refreshed: "orgs",
-- "repos", and "org:<login>" for an organization asked for by name. A row
-- without refreshed_at is a list asked for and not fetched yet (a miss).
CREATE TABLE user_github_lists (
    user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    list         TEXT   NOT NULL,
    refreshed_at TIMESTAMPTZ,
    PRIMARY KEY (user_id, list)
);

-- Conditional-request validators per user and page, with the page itself:
-- a 304 reuses the stored body. Keyed by user, not token, so they survive a
-- token rotation.
CREATE TABLE github_pages (
    user_id       BIGINT      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url           TEXT        NOT NULL,
    etag          TEXT        NOT NULL DEFAULT '',
    last_modified TEXT        NOT NULL DEFAULT '',
    next_url      TEXT        NOT NULL DEFAULT '',
    body          BYTEA       NOT NULL,
    fetched_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, url)
);

-- +goose Down
DROP TABLE github_pages;
DROP TABLE user_github_lists;
DROP TABLE user_github_repositories;
DROP TABLE user_github_org_memberships;
DROP TABLE github_organizations;
DROP TABLE users;
