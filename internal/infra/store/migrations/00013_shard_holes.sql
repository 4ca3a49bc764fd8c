-- +goose Up
-- Holes: blobs a scan met and could not read (missing from the repository,
-- damaged, unreadable). The run records them here and still moves the
-- watermarks of the refs it walked to their tips, so the next run walks
-- only the new commits and tries the holes again, instead of walking the
-- whole history again for one missing blob. A hole goes when its blob is
-- read (it is then in seen_blobs). lost: it cannot be recovered (damaged
-- or missing in the source itself: a local repository, or a mirror fetched
-- afresh that still lacks it); it is still tried again, but keeps the
-- shard from being Done no longer.
CREATE TABLE IF NOT EXISTS shard_holes (
    scope_id   BIGINT      NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    blob       BYTEA       NOT NULL,
    -- Where it was first met (as a finding would be).
    path       TEXT        NOT NULL,
    commit_id  TEXT        NOT NULL,
    reason     TEXT        NOT NULL CHECK (reason IN ('missing', 'corrupt', 'unreadable')),
    lost       BOOLEAN     NOT NULL DEFAULT false,
    attempts   INTEGER     NOT NULL DEFAULT 1,
    first_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    tried_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_id, blob)
);

-- A receipt says whether its run walked every selected ref to its tip
-- (covered: the watermarks moved there; what it could not read is in
-- shard_holes), and the scope's holes after it: open (a later run may
-- read them) and lost. Constant defaults: catalog changes only.
ALTER TABLE shard_receipts ADD COLUMN IF NOT EXISTS covered BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE shard_receipts ADD COLUMN IF NOT EXISTS holes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE shard_receipts ADD COLUMN IF NOT EXISTS lost BIGINT NOT NULL DEFAULT 0;

-- When a shard was parked (updated_at moves with every later collection
-- that finds it parked); NULL for shards parked before this column.
ALTER TABLE shards ADD COLUMN IF NOT EXISTS parked_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE shards DROP COLUMN IF EXISTS parked_at;
ALTER TABLE shard_receipts DROP COLUMN IF EXISTS lost;
ALTER TABLE shard_receipts DROP COLUMN IF EXISTS holes;
ALTER TABLE shard_receipts DROP COLUMN IF EXISTS covered;
DROP TABLE IF EXISTS shard_holes;
