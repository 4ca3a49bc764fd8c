-- The webhook deliveries a receiver has handed to Temporal (architecture
-- §3, "Push-time detection"), by GitHub's delivery id (X-GitHub-Delivery):
-- a redelivery of one is answered without starting anything. Written only
-- after the hand-off succeeded, so a delivery that failed is redelivered
-- and handled. Kept a week (GitHub redelivers for three days). A new
-- table: nothing to do online.

-- +goose Up
SET lock_timeout = '5s';
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    guid        TEXT        PRIMARY KEY,
    event       TEXT        NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_received ON webhook_deliveries (received_at);
RESET lock_timeout;

-- +goose Down
DROP TABLE IF EXISTS webhook_deliveries;
