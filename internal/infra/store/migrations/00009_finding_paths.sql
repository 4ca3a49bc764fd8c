-- +goose Up
-- Every path at which a blob holding findings was introduced: the first
-- (the findings' own path) and every other one a walk met it at since (a
-- copy, a rename, a restore), as scans record them. Presence then looks
-- for each such blob only at its paths in the tips' trees, not through
-- every tree of every tip.
CREATE TABLE finding_paths (
    scope_id BIGINT NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    blob     BYTEA  NOT NULL,
    path     TEXT   NOT NULL,
    PRIMARY KEY (scope_id, blob, path)
);

INSERT INTO finding_paths (scope_id, blob, path)
SELECT DISTINCT scope_id, blob, path FROM findings;

-- Whether finding_paths holds every path of the scope's findings' blobs:
-- so for a scope with no findings yet. A scope that had findings before
-- this migration lacks the other paths its earlier scans met, and keeps
-- reading whole tip trees for presence.
ALTER TABLE scan_scopes ADD COLUMN paths_complete BOOLEAN NOT NULL DEFAULT true;
UPDATE scan_scopes s SET paths_complete = false WHERE EXISTS (SELECT 1 FROM findings f WHERE f.scope_id = s.id);

-- +goose Down
ALTER TABLE scan_scopes DROP COLUMN paths_complete;
DROP TABLE finding_paths;
