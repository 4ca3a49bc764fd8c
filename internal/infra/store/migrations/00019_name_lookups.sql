-- +goose NO TRANSACTION
-- Lookups by name: what a user means by a name, live or stale
-- (FindCodebase), and the codebase a name belonged to before a rename
-- (CodebaseByFormerName) read these instead of the whole codebases and
-- collections tables. Names compare case-insensitively, as GitHub does.
--
-- Online (see doc.go, "Migrations"): built concurrently.

-- +goose Up
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS codebases_name ON codebases (host, lower(owner), lower(name));
CREATE INDEX CONCURRENTLY IF NOT EXISTS collections_name ON collections (host, lower(owner), lower(name), started_at);
RESET lock_timeout;

-- +goose Down
DROP INDEX IF EXISTS collections_name;
DROP INDEX IF EXISTS codebases_name;
