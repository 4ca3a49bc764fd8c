-- +goose NO TRANSACTION
-- Online (see doc.go, "Migrations"): a new table, a statement trigger on
-- findings (its creation takes the table's lock for a moment, under the
-- migration's lock_timeout), and a backfill in committed batches. Every
-- statement can run again after an interruption.

-- +goose Up
-- One row per secret of a scope, kept by the findings' inserts: the fleet
-- view and its summary read these, not a grouping of every finding
-- (architecture §8). first_id and last_id are the first and latest
-- finding (id order), first_at when the first was recorded; ignored is the
-- suppression every occurrence has ('' when one has none); present that a
-- blob holding it is at a scanned tip (finding_presence: set again by each
-- presence computation). The merge is by least and greatest, so a row
-- written twice (the backfill and the trigger, racing) ends the same.
CREATE TABLE IF NOT EXISTS secrets (
    scope_id    BIGINT      NOT NULL REFERENCES scan_scopes (id) ON DELETE CASCADE,
    rule_id     TEXT        NOT NULL,
    secret_hash TEXT        NOT NULL,
    secret_path TEXT        NOT NULL,
    first_id    BIGINT      NOT NULL,
    last_id     BIGINT      NOT NULL,
    first_at    TIMESTAMPTZ NOT NULL,
    ignored     TEXT        NOT NULL DEFAULT '',
    present     BOOLEAN     NOT NULL DEFAULT false,
    PRIMARY KEY (scope_id, rule_id, secret_hash, secret_path)
);
-- Newest first, across the fleet, by rule, and within one scope.
CREATE INDEX IF NOT EXISTS secrets_newest ON secrets (first_id);
CREATE INDEX IF NOT EXISTS secrets_rule ON secrets (rule_id, first_id);
CREATE INDEX IF NOT EXISTS secrets_scope_newest ON secrets (scope_id, first_id);

-- (A scalar subquery with LIMIT rather than EXISTS: an EXISTS may be run
-- as one hashed pass over the whole table.)
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION secrets_of_findings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO secrets AS s (scope_id, rule_id, secret_hash, secret_path, first_id, last_id, first_at, ignored, present)
        SELECT scope_id, rule_id, secret_hash, secret_path, min(id), max(id), min(created_at),
            CASE WHEN bool_and(ignored <> '') THEN min(ignored) ELSE '' END,
            bool_or((SELECT 1 FROM finding_presence p WHERE p.scope_id = added.scope_id AND p.blob = added.blob LIMIT 1) IS NOT NULL)
        FROM added GROUP BY scope_id, rule_id, secret_hash, secret_path
    ON CONFLICT (scope_id, rule_id, secret_hash, secret_path) DO UPDATE SET
        first_id = least(s.first_id, excluded.first_id),
        last_id = greatest(s.last_id, excluded.last_id),
        first_at = least(s.first_at, excluded.first_at),
        ignored = CASE WHEN s.ignored = '' OR excluded.ignored = '' THEN '' ELSE s.ignored END,
        present = s.present OR excluded.present;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE OR REPLACE TRIGGER findings_secrets AFTER INSERT ON findings
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION secrets_of_findings();

-- The secrets of the findings already there, a hundred scopes at a time.
-- +goose StatementBegin
DO $$
DECLARE
    lo   BIGINT := 0;
    last BIGINT := (SELECT coalesce(max(id), 0) FROM scan_scopes);
BEGIN
    WHILE lo < last LOOP
        INSERT INTO secrets AS s (scope_id, rule_id, secret_hash, secret_path, first_id, last_id, first_at, ignored, present)
            SELECT scope_id, rule_id, secret_hash, secret_path, min(id), max(id), min(created_at),
                CASE WHEN bool_and(ignored <> '') THEN min(ignored) ELSE '' END,
                bool_or((SELECT 1 FROM finding_presence p WHERE p.scope_id = findings.scope_id AND p.blob = findings.blob LIMIT 1) IS NOT NULL)
            FROM findings WHERE scope_id > lo AND scope_id <= lo + 100
            GROUP BY scope_id, rule_id, secret_hash, secret_path
        ON CONFLICT (scope_id, rule_id, secret_hash, secret_path) DO UPDATE SET
            first_id = least(s.first_id, excluded.first_id),
            last_id = greatest(s.last_id, excluded.last_id),
            first_at = least(s.first_at, excluded.first_at),
            ignored = excluded.ignored,
            present = excluded.present;
        lo := lo + 100;
        COMMIT;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS findings_secrets ON findings;
DROP FUNCTION IF EXISTS secrets_of_findings();
DROP TABLE IF EXISTS secrets;
