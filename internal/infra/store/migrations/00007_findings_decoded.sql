-- +goose Up
-- How a finding's secret was reached: the encodings undone to find it
-- ("base64", "base64/hex"), empty for a secret found as it is written.
ALTER TABLE findings ADD COLUMN decoded TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE findings DROP COLUMN decoded;
