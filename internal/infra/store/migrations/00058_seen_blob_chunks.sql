-- The blobs a scope has seen, packed (architecture §9, "seen_blobs at a
-- million repositories"): a row per blob cost 119 bytes (a 24-byte tuple
-- header, the scope id, the id and the outcome, then the same key again
-- in the primary key's index) for 20 bytes of blob id. A chunk holds up
-- to 96 ids of one scope whose first byte falls in one of 64 buckets
-- (id[0] >> 2), 20 bytes each, concatenated: 1,920 bytes, under TOAST's
-- threshold, so a chunk stays in its page and a write rewrites at most
-- one short chunk a bucket. A lookup reads the chunks of the buckets its
-- blobs fall in (store.SeenBlobs).
--
-- seen_blobs stays for what a chunk does not hold: blobs skipped as
-- oversized (store.OversizedBlobs counts them; few, if any) and ids that
-- are not 20 bytes; and for the rows written before this migration,
-- which every lookup still reads and the daily cleanup packs into chunks
-- in batches (store.CleanupStep, its last phase), so nothing rewrites
-- them here. seen_blob_ids shows both as one row a blob (without the
-- outcome, which only the oversized need), for people and tests. New table and view: nothing to do online.

-- +goose Up
CREATE TABLE IF NOT EXISTS seen_blob_chunks (
    scope_id BIGINT   NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    bucket   SMALLINT NOT NULL CHECK (bucket BETWEEN 0 AND 63),
    chunk    INTEGER  NOT NULL,
    ids      BYTEA    NOT NULL CHECK (length(ids) % 20 = 0 AND length(ids) BETWEEN 20 AND 1920),
    PRIMARY KEY (scope_id, bucket, chunk)
);
-- Random ids do not compress: never try.
ALTER TABLE seen_blob_chunks ALTER COLUMN ids SET STORAGE EXTERNAL;

CREATE OR REPLACE VIEW seen_blob_ids AS
    SELECT c.scope_id, substring(c.ids FROM i * 20 + 1 FOR 20) AS blob
        FROM seen_blob_chunks c, generate_series(0, length(c.ids) / 20 - 1) AS i
    UNION ALL
    SELECT scope_id, blob FROM seen_blobs;

-- +goose Down
DROP VIEW IF EXISTS seen_blob_ids;
DROP TABLE IF EXISTS seen_blob_chunks;
