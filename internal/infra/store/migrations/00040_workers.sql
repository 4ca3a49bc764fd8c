-- Workers register and heartbeat here, as runners do (architecture §2,
-- "Repository affinity"): each repository's Git work runs on the live
-- worker that owns it (placement.Owner over the active workers with a
-- fresh heartbeat), on that worker's own task queue. A new, small table:
-- nothing to do online.

-- +goose Up
SET lock_timeout = '5s';
CREATE TABLE IF NOT EXISTS workers (
    id             text PRIMARY KEY,
    -- the workflows' task queue it serves (its own is <task_queue>:git:<id>)
    task_queue     text NOT NULL DEFAULT 'gitfleet',
    state          text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining')),
    last_heartbeat timestamptz NOT NULL DEFAULT now(),
    registered_at  timestamptz NOT NULL DEFAULT now(),
    mirrors        bigint NOT NULL DEFAULT 0,
    mirror_bytes   bigint NOT NULL DEFAULT 0
);
RESET lock_timeout;

-- +goose Down
DROP TABLE IF EXISTS workers;
