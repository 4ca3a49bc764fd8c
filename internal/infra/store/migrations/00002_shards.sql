-- +goose Up
-- Shard execution (DESIGN §4). One normalized repository target is one
-- shard. Its persisted lifecycle is exactly Active | Done | Split | Parked;
-- worker-local phases are never stored here.
CREATE TABLE shards (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- "codebase:<id>" for collections, "target:<digest>" for scan requests.
    key             TEXT        NOT NULL UNIQUE,
    codebase_id     BIGINT      REFERENCES codebases (id) ON DELETE CASCADE,
    -- Clone URL (never with credentials) or absolute local path.
    location        TEXT        NOT NULL,
    local           BOOLEAN     NOT NULL DEFAULT false,
    selection       JSONB       NOT NULL DEFAULT '{}',
    status          TEXT        NOT NULL DEFAULT 'Active' CHECK (status IN ('Active', 'Done', 'Split', 'Parked')),
    park_reason     TEXT,
    -- Lease and fence: acquiring bumps the fence; every durable write checks
    -- fence and deadline in its own transaction.
    fence           BIGINT      NOT NULL DEFAULT 0,
    owner           TEXT,
    lease_deadline  TIMESTAMPTZ,
    -- The outer frontier: the receipt of the last checkpointed finalize.
    checkpoint_receipt_id BIGINT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A scope is one shard under one rule set: changing the rules (policy hash)
-- starts a new scope, so everything is scanned again under the new rules.
CREATE TABLE scan_scopes (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    shard_id    BIGINT NOT NULL REFERENCES shards (id) ON DELETE CASCADE,
    policy_hash TEXT   NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (shard_id, policy_hash)
);

-- Inner durability: one receipt per finalize of a fence.
CREATE TABLE shard_receipts (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    shard_id       BIGINT  NOT NULL REFERENCES shards (id) ON DELETE CASCADE,
    scope_id       BIGINT  NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    fence          BIGINT  NOT NULL,
    complete       BOOLEAN NOT NULL,
    commits        BIGINT  NOT NULL DEFAULT 0,
    blobs_scanned  BIGINT  NOT NULL DEFAULT 0,
    bytes_scanned  BIGINT  NOT NULL DEFAULT 0,
    blobs_skipped  BIGINT  NOT NULL DEFAULT 0,
    findings       BIGINT  NOT NULL DEFAULT 0,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (shard_id, fence)
);
ALTER TABLE shards ADD CONSTRAINT shards_checkpoint_receipt
    FOREIGN KEY (checkpoint_receipt_id) REFERENCES shard_receipts (id) ON DELETE SET NULL;

-- Per-ref watermarks: everything reachable from them has been scanned.
-- Written only by a Complete finalize.
CREATE TABLE shard_watermarks (
    scope_id   BIGINT NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    ref        TEXT   NOT NULL,
    commit_id  TEXT   NOT NULL,
    PRIMARY KEY (scope_id, ref)
);

-- Data plane: every blob scanned (or deliberately skipped) once per scope.
CREATE TABLE seen_blobs (
    scope_id   BIGINT NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    blob       BYTEA  NOT NULL,
    outcome    TEXT   NOT NULL CHECK (outcome IN ('scanned', 'binary', 'oversized')),
    PRIMARY KEY (scope_id, blob)
);

-- Findings keep where a secret was first seen and a keyed hash with a short
-- redacted preview: never the secret itself.
CREATE TABLE findings (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id     BIGINT  NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    rule_id      TEXT    NOT NULL,
    blob         BYTEA   NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset   INTEGER NOT NULL,
    line         INTEGER NOT NULL,
    path         TEXT    NOT NULL,
    commit_id    TEXT    NOT NULL,
    secret_hash  TEXT    NOT NULL,
    preview      TEXT    NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (scope_id, blob, rule_id, start_offset)
);

-- The key of the findings' keyed hashes, generated once per installation
-- unless the worker is given one.
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

-- +goose Down
DROP TABLE settings;
DROP TABLE findings;
DROP TABLE seen_blobs;
DROP TABLE shard_watermarks;
ALTER TABLE shards DROP CONSTRAINT shards_checkpoint_receipt;
DROP TABLE shard_receipts;
DROP TABLE scan_scopes;
DROP TABLE shards;
