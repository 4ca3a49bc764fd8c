-- +goose NO TRANSACTION
-- Online (see doc.go, "Migrations"): the backfill reads findings in
-- committed batches, never in one long transaction, and no lock is held
-- across it. Every statement can run again after an interruption.

-- +goose Up
-- Every path at which a blob holding findings was introduced: the first
-- (the findings' own path) and every other one a walk met it at since (a
-- copy, a rename, a restore), as scans record them. Presence then looks
-- for each such blob only at its paths in the tips' trees, not through
-- every tree of every tip.
CREATE TABLE IF NOT EXISTS finding_paths (
    scope_id BIGINT NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    blob     BYTEA  NOT NULL,
    path     TEXT   NOT NULL,
    PRIMARY KEY (scope_id, blob, path)
);

-- Whether finding_paths holds every path of the scope's findings' blobs:
-- so for a scope with no findings yet. A scope that had findings before
-- this migration lacks the other paths its earlier scans met, and keeps
-- reading whole tip trees for presence.
ALTER TABLE scan_scopes ADD COLUMN IF NOT EXISTS paths_complete BOOLEAN NOT NULL DEFAULT true;

-- The paths of the findings already there, a hundred scopes at a time.
-- +goose StatementBegin
DO $$
DECLARE
    lo   BIGINT := 0;
    last BIGINT := (SELECT coalesce(max(id), 0) FROM scan_scopes);
BEGIN
    WHILE lo < last LOOP
        INSERT INTO finding_paths (scope_id, blob, path)
            SELECT DISTINCT scope_id, blob, path FROM findings WHERE scope_id > lo AND scope_id <= lo + 100
            ON CONFLICT DO NOTHING;
        UPDATE scan_scopes s SET paths_complete = false
            WHERE s.id > lo AND s.id <= lo + 100 AND s.paths_complete
                AND EXISTS (SELECT 1 FROM findings f WHERE f.scope_id = s.id);
        lo := lo + 100;
        COMMIT;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE scan_scopes DROP COLUMN paths_complete;
DROP TABLE finding_paths;
