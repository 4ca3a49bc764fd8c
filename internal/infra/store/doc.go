// Package store is gitfleet's PostgreSQL data: codebases, their collection
// history, and the transactions that change them.
//
// # Migrations
//
// Schema changes are goose migrations embedded in the binary. `starter
// migrate` (the compose job gitfleet-migrate, `starter dev`, the test
// harnesses) applies them; workers and runners never do: they wait until
// every migration they carry is applied (WaitForSchema), serving /livez
// meanwhile, so that a liveness probe never kills a migration half way.
//
// Tables grow large (findings, seen_blobs, collections), so a migration
// must leave them readable and writable while it runs, and be able to run
// again after an interruption (a failed statement, a killed migrator):
//
//   - No table rewrite: no stored generated column, no column type change,
//     no ADD COLUMN with a volatile default. A column with a constant
//     default is a catalog change; a derived value is a plain column the
//     application writes (findings.secret_path).
//   - Indexes on existing tables are built with CREATE INDEX CONCURRENTLY
//     IF NOT EXISTS in a `-- +goose NO TRANSACTION` file, under SET
//     lock_timeout = 0 (a concurrent build only waits, blocking nobody). A
//     build that was interrupted leaves an invalid index, which Migrate
//     drops before trying again. A unique constraint is added USING INDEX
//     an index built so; a foreign key or check NOT VALID, then validated.
//   - Every statement runs with a lock timeout (Migrate sets it on its
//     connection, 5s): a statement that needs an exclusive lock gives up
//     instead of queueing every query of the table behind a long
//     transaction, and Migrate tries again. Files do not set their own
//     but for the concurrent builds (SET lock_timeout = 0, then RESET:
//     the migrations share one connection).
//   - Backfills run in a NO TRANSACTION file, in batches each committed on
//     its own (a DO block looping with COMMIT), never in one long
//     transaction.
//
// TestMigrationsAreOnline holds the files to these rules and
// TestMigrationsRewriteNoTable checks, step by step on a populated
// database, that no migration rewrites a table.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package store
