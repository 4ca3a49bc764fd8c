-- Alerts (architecture §8, "Alerts"): the messages sent to the receivers
-- of GITFLEET_NOTIFY_URL, and which secret each announced to which
-- receiver, so that a restart, a retried activity or a re-scan never
-- announces a secret twice. A receiver is its URL's digest here, never
-- the URL (a Slack webhook's URL is its credential). New tables: nothing
-- to do online.

-- +goose Up
SET lock_timeout = '5s';
-- One message: one repository's alerts of one scan (or check) to one
-- receiver. Its body is built once, so every attempt sends the same
-- bytes under the same id.
CREATE TABLE IF NOT EXISTS notification_messages (
    id         TEXT        PRIMARY KEY,
    url_digest TEXT        NOT NULL,
    kind       TEXT        NOT NULL CHECK (kind IN ('new', 'valid')),
    shard_id   BIGINT      NOT NULL,
    body       TEXT        NOT NULL,
    alerts     INT         NOT NULL,
    state      TEXT        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'refused')),
    attempts   INT         NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at    TIMESTAMPTZ
);
-- A secret (notify.Fingerprint) announced, or being announced, to a
-- receiver: written in the transaction that writes its message, so two
-- messages never claim one secret.
CREATE TABLE IF NOT EXISTS notification_alerts (
    fingerprint TEXT NOT NULL,
    url_digest  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    message_id  TEXT NOT NULL REFERENCES notification_messages (id) ON DELETE CASCADE,
    PRIMARY KEY (fingerprint, url_digest, kind)
);
CREATE INDEX IF NOT EXISTS notification_alerts_message ON notification_alerts (message_id);
-- The sends of the last minute per receiver: the fleet-wide rate bound.
CREATE TABLE IF NOT EXISTS notification_sends (
    url_digest TEXT        NOT NULL,
    sent_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS notification_sends_at ON notification_sends (url_digest, sent_at);
RESET lock_timeout;

-- +goose Down
DROP TABLE IF EXISTS notification_sends;
DROP TABLE IF EXISTS notification_alerts;
DROP TABLE IF EXISTS notification_messages;
