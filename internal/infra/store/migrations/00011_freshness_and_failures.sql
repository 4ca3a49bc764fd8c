-- +goose Up
-- Catalog changes only (no rewrite, no scan), each taking its table's lock
-- for a moment; lock_timeout makes the migration fail (and be run again)
-- rather than queue every query of the table behind a long transaction.
SET LOCAL lock_timeout = '5s';

-- The branches and tags the last completed collection saw, as
-- mirror.RefsDigest names them: the sweep's cheap change check compares the
-- remote's listing with it, so that a push to any branch or a new tag is
-- collected, not only a move of HEAD.
ALTER TABLE codebases ADD COLUMN last_refs_digest TEXT;

-- Since when gitfleet cannot read the repository: git refuses it and the API
-- either says it is private or does not know its id without a token that
-- sees its owner (deleted or hidden, it cannot tell). Not stale: kept, never
-- deleted automatically. A completed collection clears it.
ALTER TABLE codebases ADD COLUMN inaccessible_since TIMESTAMPTZ;

-- A cancelled collection is a cancel, neither failed nor succeeded. NOT
-- VALID: the rows there are are not scanned under the table's lock (they
-- all satisfy the narrower check; 00012 validates it without blocking).
ALTER TABLE collections DROP CONSTRAINT collections_status_check;
ALTER TABLE collections ADD CONSTRAINT collections_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')) NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '5s';
UPDATE collections SET status = 'failed', error_class = 'Cancelled' WHERE status = 'cancelled';
ALTER TABLE collections DROP CONSTRAINT collections_status_check;
ALTER TABLE collections ADD CONSTRAINT collections_status_check
    CHECK (status IN ('running', 'succeeded', 'failed')) NOT VALID;
ALTER TABLE codebases DROP COLUMN inaccessible_since;
ALTER TABLE codebases DROP COLUMN last_refs_digest;
