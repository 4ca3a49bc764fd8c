-- A worker writes only its own row (architecture §11, "Who may place
-- work"): a row belongs to the database role that registered it (owner,
-- current_user by default), and row-level security lets a role other than
-- the table's owner insert, update or delete only rows it owns. Placement
-- trusts live rows, so before this any holder of a writing role could
-- insert a row (or take over another worker's) and attract its share of
-- the Git work.
--
-- The table's owner (the role that migrates; the one role of a dev stack
-- or a test database) and superusers bypass row-level security: a
-- single-role installation is unchanged. Two things a worker does to rows
-- not its own go through SECURITY DEFINER functions that do that one thing:
-- forgetting the rows silent for an hour or more (live workers heartbeat
-- every 10 s), and an operator's drain or resume (`starter worker drain`).
-- Who may call them is deploy/gitfleet-db/grants.sql's business: EXECUTE is
-- revoked from PUBLIC here.
--
-- Rows from before this migration have no owner (NULL): the first role that
-- heartbeats or registers one claims it. Until then a worker still running
-- the previous release keeps heartbeating it (a NULL owner passes the
-- update check), so an upgrade does not take the fleet offline.
-- A nullable column (its default set after, so existing rows stay NULL):
-- no rewrite; the policies take the lock briefly.

-- +goose Up
SET lock_timeout = '5s';
ALTER TABLE workers ADD COLUMN IF NOT EXISTS owner text;
ALTER TABLE workers ALTER COLUMN owner SET DEFAULT current_user;
ALTER TABLE workers ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS workers_read ON workers;
CREATE POLICY workers_read ON workers FOR SELECT USING (true);
DROP POLICY IF EXISTS workers_insert ON workers;
CREATE POLICY workers_insert ON workers FOR INSERT WITH CHECK (owner = current_user);
DROP POLICY IF EXISTS workers_update ON workers;
CREATE POLICY workers_update ON workers FOR UPDATE
    USING (owner = current_user OR owner IS NULL)
    WITH CHECK (owner = current_user OR owner IS NULL);
DROP POLICY IF EXISTS workers_delete ON workers;
CREATE POLICY workers_delete ON workers FOR DELETE USING (owner = current_user);
RESET lock_timeout;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gitfleet_forget_workers(silent interval) RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DELETE FROM public.workers
    WHERE last_heartbeat < now() - greatest(silent, interval '1 hour')
    RETURNING id
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION gitfleet_forget_workers(interval) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gitfleet_set_worker_state(worker text, new_state text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH changed AS (UPDATE public.workers SET state = new_state WHERE id = worker RETURNING 1)
    SELECT count(*) > 0 FROM changed
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION gitfleet_set_worker_state(text, text) FROM PUBLIC;

-- +goose Down
DROP FUNCTION IF EXISTS gitfleet_set_worker_state(text, text);
DROP FUNCTION IF EXISTS gitfleet_forget_workers(interval);
DROP POLICY IF EXISTS workers_read ON workers;
DROP POLICY IF EXISTS workers_insert ON workers;
DROP POLICY IF EXISTS workers_update ON workers;
DROP POLICY IF EXISTS workers_delete ON workers;
ALTER TABLE workers DISABLE ROW LEVEL SECURITY;
ALTER TABLE workers DROP COLUMN IF EXISTS owner;
