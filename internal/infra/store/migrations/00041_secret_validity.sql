-- Validity checks (architecture §8, "Which secrets still work"): the last
-- answer of a secret's provider, keyed as triage keys it (secret_states:
-- the shard's key, rule, keyed hash, path), so that it stays with a
-- codebase through renames and new scopes. Never the secret: its state,
-- when checked, the class of an unknown, and the non-secret facts the
-- answer gave (account, key id, scopes). A new table: nothing to do
-- online.

-- +goose Up
SET lock_timeout = '5s';
CREATE TABLE IF NOT EXISTS secret_validity (
    subject     TEXT        NOT NULL,
    rule_id     TEXT        NOT NULL,
    secret_hash TEXT        NOT NULL,
    secret_path TEXT        NOT NULL,
    provider    TEXT        NOT NULL,
    state       TEXT        NOT NULL CHECK (state IN ('valid', 'invalid', 'unknown')),
    -- Why an unknown is unknown (rate-limited, server-error, timeout, ...).
    error_class TEXT        NOT NULL DEFAULT '',
    detail      TEXT        NOT NULL DEFAULT '',
    facts       JSONB       NOT NULL DEFAULT '{}',
    checked_at  TIMESTAMPTZ NOT NULL,
    -- The last check that found it valid, and when a secret once valid
    -- was first found invalid (revoked; cleared when it works again).
    valid_at    TIMESTAMPTZ,
    revoked_at  TIMESTAMPTZ,
    PRIMARY KEY (subject, rule_id, secret_hash, secret_path)
);
-- The fleet's valid secrets first, and the oldest checks for the schedule.
CREATE INDEX IF NOT EXISTS secret_validity_state ON secret_validity (state, checked_at);
RESET lock_timeout;

-- +goose Down
DROP TABLE IF EXISTS secret_validity;
