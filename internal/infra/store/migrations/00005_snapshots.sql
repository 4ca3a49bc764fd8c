-- +goose Up
-- Snapshot propagation (DESIGN §7): the hosts that hold snapshots, the
-- snapshots, and each runner's copy of each snapshot.

-- Runner ids become task queue names, file names and host labels: the CHECK
-- repeats snapshot.ValidRunnerID so that no writer can slip past it.
CREATE TABLE runners (
    id             TEXT        PRIMARY KEY
                               CONSTRAINT runners_id_valid CHECK (id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    peer_addr      TEXT        NOT NULL,
    capacity       INTEGER     NOT NULL,
    -- 0: the runner's image store is unbounded.
    quota_bytes    BIGINT      NOT NULL DEFAULT 0,
    state          TEXT        NOT NULL CHECK (state IN ('ready', 'draining', 'offline')),
    last_heartbeat TIMESTAMPTZ NOT NULL,
    registered_at  TIMESTAMPTZ NOT NULL
);

-- Names become index annotations and workflow ids: the CHECK repeats
-- snapshot.ValidName.
CREATE TABLE snapshots (
    name         TEXT        PRIMARY KEY
                             CONSTRAINT snapshots_name_valid CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,127}$'),
    kind         TEXT        NOT NULL CHECK (kind IN ('image', 'repo')),
    -- What runners pull: the user's reference, or what a build pushed
    -- (empty until built). The digest is recorded once and never changes.
    image_ref    TEXT        NOT NULL DEFAULT '',
    digest       TEXT        NOT NULL DEFAULT '',
    -- For kind repo. The codebase may be deleted (stale for 30 days) while
    -- the image it was built from lives on.
    repo         TEXT,
    codebase_id  BIGINT      CONSTRAINT snapshots_codebase REFERENCES codebases (id) ON DELETE SET NULL,
    external_id  TEXT,
    commit_sha   TEXT,
    base_image   TEXT        NOT NULL DEFAULT '',
    state        TEXT        NOT NULL CHECK (state IN ('pending', 'pulling', 'building', 'active', 'error', 'removing')),
    error_reason TEXT        NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
-- Deleting a codebase sets its snapshots' codebase_id to NULL: without an
-- index every such delete would scan the table.
CREATE INDEX snapshots_codebase_id ON snapshots (codebase_id) WHERE codebase_id IS NOT NULL;

-- One runner's copy of one snapshot.
CREATE TABLE snapshot_runners (
    runner_id    TEXT        NOT NULL CONSTRAINT snapshot_runners_runner REFERENCES runners (id) ON DELETE CASCADE,
    snapshot_ref TEXT        NOT NULL CONSTRAINT snapshot_runners_snapshot REFERENCES snapshots (name) ON DELETE CASCADE,
    state        TEXT        NOT NULL CHECK (state IN ('pulling_snapshot', 'building_snapshot', 'ready', 'error', 'removing')),
    error_reason TEXT        NOT NULL DEFAULT '',
    bytes_done   BIGINT      NOT NULL DEFAULT 0,
    bytes_total  BIGINT      NOT NULL DEFAULT 0,
    -- Where the last pull came from: "registry" or "peer:<id>".
    source       TEXT        NOT NULL DEFAULT '',
    -- Automatic retries since the row was last ready (the backoff doubles
    -- with each).
    retries      INTEGER     NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ NOT NULL,
    -- The last state change only: the pull window is measured from it, so
    -- progress reports must not move it (they move progress_at).
    updated_at   TIMESTAMPTZ NOT NULL,
    progress_at  TIMESTAMPTZ,
    -- Concurrent propagations insert with ON CONFLICT on this pair; its
    -- index also serves lookups by runner and the cascade from runners.
    CONSTRAINT snapshot_runners_pair UNIQUE (runner_id, snapshot_ref)
);
CREATE INDEX snapshot_runners_snapshot_ref ON snapshot_runners (snapshot_ref);
CREATE INDEX snapshot_runners_state ON snapshot_runners (state);

-- +goose Down
DROP TABLE snapshot_runners;
DROP TABLE snapshots;
DROP TABLE runners;
