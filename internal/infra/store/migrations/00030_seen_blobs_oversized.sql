-- +goose NO TRANSACTION
-- The blobs of a scope skipped as oversized (few, if any): every scan
-- counts them at its end (store.OversizedBlobs), since no later scan reads
-- them again, so that no later result calls the scope complete.
--
-- Online (see doc.go, "Migrations"): built concurrently.

-- +goose Up
SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS seen_blobs_oversized ON seen_blobs (scope_id) WHERE outcome = 'oversized';
RESET lock_timeout;

-- +goose Down
DROP INDEX IF EXISTS seen_blobs_oversized;
