-- +goose Up
-- Validates 00011's status check over the existing rows under SHARE UPDATE
-- EXCLUSIVE, which blocks neither reads nor writes, in a transaction of its
-- own (00011's lock is long released).
SET LOCAL lock_timeout = '5s';
ALTER TABLE collections VALIDATE CONSTRAINT collections_status_check;

-- +goose Down
SELECT 1;
