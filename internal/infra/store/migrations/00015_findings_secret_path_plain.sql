-- An installation that ran migration 00010 as first written has
-- findings.secret_path as a stored generated column; the application writes
-- it now. Making it a plain column is a catalog change that keeps every
-- value (no rewrite); elsewhere this does nothing.

-- +goose Up
ALTER TABLE findings ALTER COLUMN secret_path DROP EXPRESSION IF EXISTS;

-- +goose Down
-- The column stays plain: the application writes it either way.
SELECT 1;
