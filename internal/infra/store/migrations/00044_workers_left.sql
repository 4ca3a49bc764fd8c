-- A worker that stops leaves the fleet before it drains (architecture §2,
-- "Repository affinity"): left_at is when it said so, NULL while it
-- heartbeats. A left worker owns nothing at once, instead of one offline
-- bound later. A nullable column without a default on a small table: no
-- rewrite.

-- +goose Up
SET lock_timeout = '5s';
ALTER TABLE workers ADD COLUMN IF NOT EXISTS left_at timestamptz;
RESET lock_timeout;

-- +goose Down
ALTER TABLE workers DROP COLUMN IF EXISTS left_at;
