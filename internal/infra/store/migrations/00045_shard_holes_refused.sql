-- +goose Up
-- A hole is also an object a scan refused over one of gitread's limits (a
-- delta bomb, a delta cycle, a tree nested too deep): the scan reads
-- around it, and records it with the limit's reason ("over a limit: delta
-- chain"), lost (the same data trips the same bound). The check is
-- replaced by one that admits those reasons: added NOT VALID (no scan
-- under the exclusive lock), then validated (existing rows all pass).
ALTER TABLE shard_holes DROP CONSTRAINT IF EXISTS shard_holes_reason_check;
ALTER TABLE shard_holes ADD CONSTRAINT shard_holes_reason_check
    CHECK (reason IN ('missing', 'corrupt', 'unreadable') OR reason LIKE 'over a limit: %') NOT VALID;
ALTER TABLE shard_holes VALIDATE CONSTRAINT shard_holes_reason_check;

-- +goose Down
DELETE FROM shard_holes WHERE reason LIKE 'over a limit: %';
ALTER TABLE shard_holes DROP CONSTRAINT IF EXISTS shard_holes_reason_check;
ALTER TABLE shard_holes ADD CONSTRAINT shard_holes_reason_check
    CHECK (reason IN ('missing', 'corrupt', 'unreadable')) NOT VALID;
ALTER TABLE shard_holes VALIDATE CONSTRAINT shard_holes_reason_check;
