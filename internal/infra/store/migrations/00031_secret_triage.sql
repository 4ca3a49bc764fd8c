-- +goose Up
-- Triage (architecture §8): a secret's state, and every change of it.
-- New tables only; nothing existing is touched.
--
-- A secret here is what the findings views group by (rule, keyed hash,
-- and for a path-only rule the path) within a subject: the shard's key,
-- 'codebase:<id>' for a collected repository — so the state stays with
-- the codebase through renames and transfers — or 'target:<digest>' for a
-- scan target. It is not a scope's: rules changing (a new scope) keep the
-- secret hash, and so its state.
CREATE TABLE secret_states (
    subject     TEXT        NOT NULL,
    rule_id     TEXT        NOT NULL,
    secret_hash TEXT        NOT NULL,
    secret_path TEXT        NOT NULL,
    -- open, or resolved with GitHub secret scanning's reasons.
    state       TEXT        NOT NULL CHECK (state IN ('open', 'revoked', 'false_positive', 'used_in_tests', 'wont_fix')),
    actor       TEXT        NOT NULL,
    changed_at  TIMESTAMPTZ NOT NULL,
    comment     TEXT        NOT NULL DEFAULT '',
    -- The blobs that held the secret when it was resolved: one found in
    -- another blob since (a new commit holding it) is "seen again after
    -- resolution".
    known_blobs BYTEA[]     NOT NULL DEFAULT '{}',
    PRIMARY KEY (subject, rule_id, secret_hash, secret_path)
);
CREATE INDEX secret_states_resolved ON secret_states (state, subject) WHERE state <> 'open';

-- Append-only: every resolve and reopen, never updated.
CREATE TABLE secret_state_history (
    id          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subject     TEXT        NOT NULL,
    rule_id     TEXT        NOT NULL,
    secret_hash TEXT        NOT NULL,
    secret_path TEXT        NOT NULL,
    state       TEXT        NOT NULL CHECK (state IN ('open', 'revoked', 'false_positive', 'used_in_tests', 'wont_fix')),
    actor       TEXT        NOT NULL,
    changed_at  TIMESTAMPTZ NOT NULL,
    comment     TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX secret_state_history_secret ON secret_state_history (subject, rule_id, secret_hash, secret_path, id);

-- +goose Down
DROP TABLE secret_state_history;
DROP TABLE secret_states;
