package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/store"
)

// scratch is a database of its own, for tests that migrate step by step
// or need the planner to see only their rows.
func scratch(t *testing.T, name string) *store.Store {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Store.Pool().Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, env.PG.URL(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// migrationFile is one migration's Up section, as statements.
type migrationFile struct {
	name    string
	noTx    bool
	created map[string]bool // tables the file creates
	stmts   []string        // comments stripped, whitespace folded
}

var (
	sqlComment     = regexp.MustCompile(`(?m)--.*$`)
	createTable    = regexp.MustCompile(`(?i)^CREATE TABLE (IF NOT EXISTS )?(\w+)`)
	createIndex    = regexp.MustCompile(`(?i)^CREATE (UNIQUE )?INDEX (CONCURRENTLY )?(IF NOT EXISTS )?\w+ ON (\w+)`)
	alterTable     = regexp.MustCompile(`(?i)^ALTER TABLE (\w+)`)
	createFunction = regexp.MustCompile(`(?i)^CREATE (OR REPLACE )?(FUNCTION|POLICY) `)
	dml            = regexp.MustCompile(`(?i)\b(INSERT INTO|UPDATE|DELETE FROM) (\w+)`)
)

func readMigrations(t *testing.T) []migrationFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("migrations: %v %v", paths, err)
	}
	var out []migrationFile
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		f := migrationFile{name: filepath.Base(p), noTx: strings.Contains(text, "-- +goose NO TRANSACTION"), created: map[string]bool{}}
		up, _, _ := strings.Cut(text[strings.Index(text, "-- +goose Up"):], "-- +goose Down")
		// A StatementBegin/End block is one statement (a DO block).
		for i, part := range strings.Split(up, "-- +goose Statement") {
			part = sqlComment.ReplaceAllString(strings.TrimPrefix(strings.TrimPrefix(part, "Begin"), "End"), "")
			var stmts []string
			if i%2 == 1 {
				stmts = []string{part}
			} else {
				stmts = strings.Split(part, ";")
			}
			for _, s := range stmts {
				if s = strings.Join(strings.Fields(s), " "); s != "" {
					f.stmts = append(f.stmts, s)
					if m := createTable.FindStringSubmatch(s); m != nil {
						f.created[strings.ToLower(m[2])] = true
					}
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// The migrations follow doc.go's rules for large tables. A table created in
// the same file is new and empty: anything goes there.
func TestMigrationsAreOnline(t *testing.T) {
	for _, f := range readMigrations(t) {
		t.Run(f.name, func(t *testing.T) {
			lastLockTimeout := ""
			for _, s := range f.stmts {
				up := strings.ToUpper(s)
				fail := func(why string) { t.Errorf("%s:\n  %s", why, s) }
				if m := createIndex.FindStringSubmatch(s); m != nil && !f.created[strings.ToLower(m[4])] {
					if m[2] == "" || !f.noTx {
						fail("an index on an existing table is built CONCURRENTLY, in a NO TRANSACTION file")
					}
					if m[3] == "" {
						fail("a concurrent index build is written IF NOT EXISTS, to run again after an interruption")
					}
				}
				if m := alterTable.FindStringSubmatch(s); m != nil && !f.created[strings.ToLower(m[1])] {
					switch {
					case strings.Contains(up, "GENERATED ALWAYS AS") && strings.Contains(up, "STORED"):
						fail("a stored generated column rewrites the table: write a plain column")
					case regexp.MustCompile(`\bTYPE\b`).MatchString(up):
						fail("a column type change rewrites the table")
					case strings.Contains(up, "SET NOT NULL"):
						fail("SET NOT NULL scans the table under an exclusive lock: add a CHECK NOT VALID, validate it")
					case regexp.MustCompile(`ADD CONSTRAINT \w+ (UNIQUE|PRIMARY KEY) \(`).MatchString(up):
						fail("a unique constraint builds its index under an exclusive lock: build it concurrently, ADD ... USING INDEX")
					case regexp.MustCompile(`ADD CONSTRAINT \w+ (FOREIGN KEY|CHECK)`).MatchString(up) && !strings.Contains(up, "NOT VALID"):
						fail("a foreign key or check is added NOT VALID and validated apart")
					case regexp.MustCompile(`DEFAULT (CLOCK_TIMESTAMP|RANDOM|GEN_RANDOM_UUID|NEXTVAL)`).MatchString(up):
						fail("a volatile default rewrites the table")
					case f.noTx && strings.Contains(up, "ADD COLUMN") && !strings.Contains(up, "ADD COLUMN IF NOT EXISTS"):
						fail("a NO TRANSACTION file runs again after an interruption: ADD COLUMN IF NOT EXISTS")
					}
				}
				if f.noTx && createTable.MatchString(s) && !strings.Contains(up, "IF NOT EXISTS") {
					fail("a NO TRANSACTION file runs again after an interruption: CREATE TABLE IF NOT EXISTS")
				}
				for _, m := range dml.FindAllStringSubmatch(s, -1) {
					// A function's body runs when it is called, a policy when rows are
					// written: neither touches rows now.
					if createFunction.MatchString(s) {
						break
					}
					// "DO UPDATE SET" is an INSERT's ON CONFLICT clause, on its own table.
					if f.created[strings.ToLower(m[2])] || strings.EqualFold(m[2], "goose_db_version") || strings.EqualFold(m[2], "SET") {
						continue
					}
					if !f.noTx || !strings.HasPrefix(up, "DO ") || !strings.Contains(up, "COMMIT") {
						fail("a backfill of an existing table runs in committed batches (a DO block with COMMIT, NO TRANSACTION)")
					}
				}
				if strings.Contains(up, "LOCK_TIMEOUT") && (strings.HasPrefix(up, "SET ") || strings.HasPrefix(up, "RESET ")) {
					lastLockTimeout = up
				}
			}
			if f.noTx && lastLockTimeout != "" && !strings.HasPrefix(lastLockTimeout, "RESET") {
				t.Errorf("a NO TRANSACTION file that sets lock_timeout resets it after: the next migration runs on the same connection")
			}
		})
	}
}

// relfilenodes are the storage files of the tables: a rewrite gives a
// table a new one.
func relfilenodes(t *testing.T, st *store.Store) map[string]uint32 {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT relname, relfilenode::int8 FROM pg_class
		WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace AND relname <> 'goose_db_version'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]uint32{}
	for rows.Next() {
		var name string
		var node int64
		if err := rows.Scan(&name, &node); err != nil {
			t.Fatal(err)
		}
		out[name] = uint32(node)
	}
	return out
}

// No migration rewrites a table that holds rows: applied one at a time to
// a database populated as the application of each version wrote it, every
// table keeps its storage, and the backfills leave what the application
// would have written.
func TestMigrationsRewriteNoTable(t *testing.T) {
	ctx := context.Background()
	st := scratch(t, "m_rewrite")
	status, err := st.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seeded := false
	for _, v := range status.Pending {
		before := relfilenodes(t, st)
		if err := st.MigrateTo(ctx, v); err != nil {
			t.Fatalf("migration %d: %v", v, err)
		}
		for name, node := range relfilenodes(t, st) {
			if old, ok := before[name]; ok && old != node {
				t.Errorf("migration %d rewrote %s", v, name)
			}
		}
		if v >= 2 && !seeded {
			seeded = true
			if _, err := st.Pool().Exec(ctx, `
				INSERT INTO codebases (host, external_repo_id, owner, name) VALUES ('h', '1', 'o', 'n');
				INSERT INTO shards (key, location) VALUES ('target:m', 'https://h/o/n');
				INSERT INTO scan_scopes (shard_id, policy_hash) SELECT id, 'p' FROM shards WHERE key = 'target:m';
				INSERT INTO seen_blobs (scope_id, blob, outcome) SELECT id, '\x01', 'scanned' FROM scan_scopes;
				INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview)
					SELECT id, 'r', '\x01'::bytea, 0, 8, 1, 'a/key', 'c1', 's1', '' FROM scan_scopes
					UNION ALL SELECT id, 'pem', '\x02', 0, 0, 0, 'x.pem', 'c1', '', '' FROM scan_scopes`); err != nil {
				t.Fatal(err)
			}
		}
	}
	var paths, secretPaths []string
	if err := st.Pool().QueryRow(ctx, `SELECT array_agg(path ORDER BY path) FROM finding_paths`).Scan(&paths); err != nil {
		t.Fatal(err)
	}
	if err := st.Pool().QueryRow(ctx, `SELECT array_agg(secret_path ORDER BY rule_id) FROM findings`).Scan(&secretPaths); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(paths, []string{"a/key", "x.pem"}) || !slices.Equal(secretPaths, []string{"x.pem", ""}) {
		t.Errorf("backfilled finding paths %q, secret paths %q; want [a/key x.pem], [x.pem \"\"]", paths, secretPaths)
	}
}

// A migration that needs a lock another transaction holds gives up after
// the lock timeout, instead of making every query of the table wait behind
// it, and is tried again.
func TestMigrationGivesUpOnALockAndTriesAgain(t *testing.T) {
	ctx := context.Background()
	st := scratch(t, "m_lock")
	if err := st.MigrateTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	before, err := st.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(ctx)
	if _, err := reader.Exec(ctx, `SELECT count(*) FROM findings`); err != nil {
		t.Fatal(err)
	}

	// The reader stays: every try gives up, and the schema stays.
	var retries int
	_, err = st.MigrateWith(ctx, store.MigrateOptions{LockTimeout: 50 * time.Millisecond, Attempts: 3, Pause: time.Millisecond,
		OnRetry: func(error, time.Duration) { retries++ }})
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "55P03" || retries != 2 {
		t.Fatalf("migrate behind a reader: %v after %d retries; want lock_not_available after 2", err, retries)
	}
	if s, err := st.Schema(ctx); err != nil || s.Version != before.Version {
		t.Fatalf("schema %+v, %v; want still at %d", s, err, before.Version)
	}

	// The reader ends while the migrator waits to try again: it goes on.
	applied, err := st.MigrateWith(ctx, store.MigrateOptions{LockTimeout: 50 * time.Millisecond, Pause: time.Millisecond,
		OnRetry: func(error, time.Duration) { _ = reader.Rollback(ctx) }})
	if err != nil || len(applied) == 0 || applied[0].Version != 15 {
		t.Fatalf("migrate after the reader ended: %v, %v", applied, err)
	}
	if s, _ := st.Schema(ctx); !s.Current() {
		t.Fatalf("schema %+v, want current", s)
	}
}

// A concurrent index build that was interrupted leaves an invalid index of
// the migration's name; the next Migrate builds it anew instead of taking
// the invalid one for done.
func TestMigrateRebuildsAnInterruptedIndex(t *testing.T) {
	ctx := context.Background()
	st := scratch(t, "m_invalid")
	if err := st.MigrateTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	// An index build fails half way (here on duplicates) and leaves its
	// index behind, invalid.
	if _, err := st.Pool().Exec(ctx, `INSERT INTO shards (key, location) VALUES ('target:a', 'same'), ('target:b', 'same')`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY shards_codebase_id ON shards (location)`); err == nil {
		t.Fatal("the interrupted build succeeded")
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var valid bool
	var def string
	if err := st.Pool().QueryRow(ctx, `SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i
		WHERE i.indexrelid = 'shards_codebase_id'::regclass`).Scan(&valid, &def); err != nil {
		t.Fatal(err)
	}
	if !valid || !strings.Contains(def, "(codebase_id)") {
		t.Fatalf("shards_codebase_id: valid %t, %s", valid, def)
	}
}

// An installation that ran migration 00010 as first written has
// findings.secret_path as a stored generated column; after the migrations
// it is a plain column, and the application's writes work.
func TestMigrationsConvergeFromTheGeneratedSecretPath(t *testing.T) {
	ctx := context.Background()
	st := scratch(t, "m_generated")
	if err := st.MigrateTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `
		DROP INDEX findings_by_secret;
		ALTER TABLE findings DROP COLUMN secret_path;
		ALTER TABLE findings ADD COLUMN secret_path TEXT NOT NULL
			GENERATED ALWAYS AS (CASE WHEN secret_hash <> '' THEN '' WHEN archive = '' THEN path ELSE path || '!' || archive END) STORED;
		CREATE INDEX findings_by_secret ON findings (scope_id, rule_id, secret_hash, secret_path, id)`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var generated bool
	if err := st.Pool().QueryRow(ctx, `SELECT attgenerated <> '' FROM pg_attribute
		WHERE attrelid = 'findings'::regclass AND attname = 'secret_path'`).Scan(&generated); err != nil || generated {
		t.Fatalf("secret_path generated %t, %v; want a plain column", generated, err)
	}
	id, err := st.EnsureShard(ctx, shard.Spec{Key: "target:gen", Target: target.Target{Location: "https://h/o/gen"}})
	if err != nil {
		t.Fatal(err)
	}
	scope, _ := st.Scope(ctx, id, "p")
	c, err := st.AcquireShard(ctx, id, "o", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	pem := occ("pem", "", 1, 0, "dist/app.jar", 0, "c1")
	pem.Archive = "a.pem"
	if _, err := st.WriteData(ctx, c.Lease, scope, store.DataOps{Findings: []store.Finding{pem}}); err != nil {
		t.Fatal(err)
	}
	p, err := st.Secrets(ctx, scope, store.Page{})
	if err != nil || len(p.Secrets) != 1 || p.Secrets[0].File != "dist/app.jar!a.pem" {
		t.Fatalf("secrets: %+v, %v", p, err)
	}
}

// Every foreign key has an index led by its columns: deleting or updating
// a referenced row looks the referencing rows up, and without one scans
// the whole referencing table for every row (the stale cleanup's cascade).
func TestEveryForeignKeyHasAnIndex(t *testing.T) {
	rows, err := env.Store.Pool().Query(context.Background(), `
		SELECT c.conrelid::regclass::text, c.conname, (SELECT string_agg(a.attname, ', ' ORDER BY k.n)
			FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)
		FROM pg_constraint c
		WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
			AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid
				AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey
				AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] <@ c.conkey)
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var table, name, cols string
		if err := rows.Scan(&table, &name, &cols); err != nil {
			t.Fatal(err)
		}
		t.Errorf("foreign key %s on %s (%s) has no index led by its columns", name, table, cols)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
