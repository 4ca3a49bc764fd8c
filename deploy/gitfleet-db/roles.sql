-- gitfleet's database roles (docs/architecture.md §10, §11), created by
-- the database's superuser on the first start of a fresh volume
-- (init-roles.sh, which then sets their passwords), or by hand on an
-- existing installation. Safe to run again.
--
--   gitfleet         owns the schema: `starter migrate` (the compose job
--                    gitfleet-migrate) creates and changes the tables, and
--                    grants.sql gives the others what they use.
--   gitfleet_worker  workers: reads and writes every table, no DDL; of the
--                    workers table, only the rows it registered (migration
--                    00047: row-level security keyed by the session's role).
--   gitfleet_starter the starter (its users): as a worker, except that the
--                    workers table is read-only to it (it cannot register a
--                    worker and attract Git work); it drains and resumes
--                    workers through gitfleet_set_worker_state only.
--   gitfleet_runner  runners, which parse untrusted images and serve a peer
--                    port: their own rows (runners, snapshot_runners) and
--                    the schema version, nothing else (no users' tokens, no
--                    findings).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gitfleet') THEN
        CREATE ROLE gitfleet LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gitfleet_worker') THEN
        CREATE ROLE gitfleet_worker LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gitfleet_starter') THEN
        CREATE ROLE gitfleet_starter LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gitfleet_runner') THEN
        CREATE ROLE gitfleet_runner LOGIN;
    END IF;
    EXECUTE format('ALTER DATABASE %I OWNER TO gitfleet', current_database());
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO gitfleet_worker, gitfleet_starter, gitfleet_runner', current_database());
END
$$;

ALTER SCHEMA public OWNER TO gitfleet;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO gitfleet_worker, gitfleet_starter, gitfleet_runner;

-- What the migrations create from now on is the workers' and the
-- starter's to read and write as it is created (the runners' tables, and
-- what the starter may not write, are grants.sql's, after the migrations).
ALTER DEFAULT PRIVILEGES FOR ROLE gitfleet IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO gitfleet_worker, gitfleet_starter;
ALTER DEFAULT PRIVILEGES FOR ROLE gitfleet IN SCHEMA public
    GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO gitfleet_worker, gitfleet_starter;
