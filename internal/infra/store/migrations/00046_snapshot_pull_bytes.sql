-- What each attempt of a snapshot pull made each source send (architecture
-- §7), written by the runner as the bytes arrive (with its progress) and by
-- the propagation when the attempt succeeds: a runner killed mid-pull
-- keeps what it received up to its last write, and a propagation's totals
-- sum every attempt of its run. Kept a week (ForgetRunners prunes older
-- counts); a propagation sums its run's within the hour. A new table:
-- nothing to do online.

-- +goose Up
SET lock_timeout = '5s';
CREATE TABLE IF NOT EXISTS snapshot_pull_bytes (
    -- The propagation run that scheduled the pull, and the attempt:
    -- "<activity id>/<attempt>".
    run_id       TEXT        NOT NULL,
    attempt      TEXT        NOT NULL,
    -- "registry" or "peer:<id>".
    source       TEXT        NOT NULL,
    runner_id    TEXT        NOT NULL,
    snapshot_ref TEXT        NOT NULL,
    bytes        BIGINT      NOT NULL CHECK (bytes >= 0),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, attempt, source)
);
CREATE INDEX IF NOT EXISTS snapshot_pull_bytes_updated ON snapshot_pull_bytes (updated_at);
RESET lock_timeout;

-- +goose Down
DROP TABLE IF EXISTS snapshot_pull_bytes;
