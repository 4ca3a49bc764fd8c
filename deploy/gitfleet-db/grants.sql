-- What gitfleet's roles may do with the tables (roles.sql says who they
-- are), run by the owner after every `starter migrate` (the compose job
-- gitfleet-grants): a migration's new table is the workers' at once
-- (roles.sql's default privileges), and this covers tables made before the
-- roles existed, in an upgraded installation. Safe to run again.
--
-- A runner's queries (store: RegisterRunner, HeartbeatRunner,
-- SetSnapshotRunnerProgress, the schema check): a new one that touches
-- another table needs a line here, and roles_test.go runs them under this
-- role.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO gitfleet_worker, gitfleet_starter;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO gitfleet_worker, gitfleet_starter;

-- The workers table (migration 00047): a worker writes only the rows its
-- role registered (row-level security) and forgets rows silent for an hour
-- or more through gitfleet_forget_workers; the starter only reads it, and
-- drains or resumes a worker through gitfleet_set_worker_state. Whoever
-- holds the starter's role cannot register a worker, so cannot attract
-- Git work.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON workers FROM gitfleet_starter;
GRANT EXECUTE ON FUNCTION gitfleet_forget_workers(interval) TO gitfleet_worker;
GRANT EXECUTE ON FUNCTION gitfleet_set_worker_state(text, text) TO gitfleet_starter;

REVOKE ALL ON ALL TABLES IN SCHEMA public FROM gitfleet_runner;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM gitfleet_runner;
GRANT SELECT ON goose_db_version TO gitfleet_runner;
GRANT SELECT, INSERT, UPDATE ON runners TO gitfleet_runner;
GRANT SELECT, UPDATE ON snapshot_runners TO gitfleet_runner;
