-- +goose Up
-- Catalog changes only (no rewrite, no scan), taking the table's lock for
-- a moment; lock_timeout makes the migration fail (and be run again)
-- rather than queue every query of the table behind a long transaction.
SET LOCAL lock_timeout = '5s';

-- The version of the finding key a scope's secret hashes are made with
-- (architecture §11). The key itself is no longer kept in the database:
-- workers are given it (GITFLEET_FINDING_KEY_FILE), and a new version
-- starts new scopes. NULL: a scope made before keys had versions, under the
-- key the database held (settings 'finding_hash_key', which this migration
-- leaves where it is: `starter admin finding-key export` writes it to a
-- file for the workers, `starter admin finding-key forget` removes it).
ALTER TABLE scan_scopes ADD COLUMN IF NOT EXISTS key_version INTEGER;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE scan_scopes DROP COLUMN IF EXISTS key_version;
