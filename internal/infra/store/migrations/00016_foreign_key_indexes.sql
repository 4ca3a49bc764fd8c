-- +goose NO TRANSACTION
-- Indexes under the foreign keys that had none. Deleting a codebase looks
-- up its shards and the collections that retired it, deleting a scope its
-- receipts, deleting a receipt the shards checkpointed at it: without these
-- every such row deleted scanned the whole referencing table, which made
-- the daily stale cleanup time out at scale. (The two on the GitHub
-- cache's organizations, which are small, for the same rule:
-- TestEveryForeignKeyHasAnIndex.)
--
-- Online (see doc.go, "Migrations"): built concurrently, so the tables stay
-- readable and writable; a concurrent build only waits, blocking nobody.

-- +goose Up
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS shards_codebase_id ON shards (codebase_id) WHERE codebase_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS shards_checkpoint_receipt_id ON shards (checkpoint_receipt_id)
    WHERE checkpoint_receipt_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS collections_retired_codebase_id ON collections (retired_codebase_id)
    WHERE retired_codebase_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS shard_receipts_scope_id ON shard_receipts (scope_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_github_repositories_org_id ON user_github_repositories (org_id)
    WHERE org_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_github_org_memberships_org_id ON user_github_org_memberships (org_id);
RESET lock_timeout;

-- +goose Down
DROP INDEX IF EXISTS user_github_org_memberships_org_id;
DROP INDEX IF EXISTS user_github_repositories_org_id;
DROP INDEX IF EXISTS shard_receipts_scope_id;
DROP INDEX IF EXISTS collections_retired_codebase_id;
DROP INDEX IF EXISTS shards_checkpoint_receipt_id;
DROP INDEX IF EXISTS shards_codebase_id;
