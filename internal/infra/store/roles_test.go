package store_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/store"
)

// deployDB holds the compose deployment's database scripts.
const deployDB = "../../../deploy/gitfleet-db"

// The compose deployment's roles, for real: init-roles.sh (as the
// database's first start runs it, with psql and password files) creates
// them, the owner migrates and runs grants.sql (as the gitfleet-migrate
// and gitfleet-grants jobs do), then the worker's and the runner's queries
// run under their own roles. A runner reads and writes its own rows and
// nothing else: not the users' tokens, not the findings; neither it nor a
// worker can change the schema.
func TestComposeRoles(t *testing.T) {
	ctx := context.Background()
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql is needed (the compose jobs run it): ", err)
	}
	const db = "gitfleet_roles"
	if err := env.PG.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	secrets := t.TempDir()
	for _, role := range []string{"gitfleet", "gitfleet_worker", "gitfleet_runner"} {
		if err := os.WriteFile(filepath.Join(secrets, role+"_db_password"), []byte("pw-"+role+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := strconv.Itoa(env.PG.Port())
	run := func(user string, args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+port, "PGUSER="+user, "PGDATABASE="+db,
			"POSTGRES_USER="+user, "POSTGRES_DB="+db, "GITFLEET_SECRETS_DIR="+secrets,
			"GITFLEET_ROLES_SQL="+filepath.Join(deployDB, "roles.sql"), "PATH="+filepath.Dir(psql)+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	as := func(role string) *store.Store {
		t.Helper()
		u, _ := url.Parse(env.PG.URL(db))
		u.User = url.User(role)
		st, err := store.Open(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}

	run("postgres", "sh", filepath.Join(deployDB, "init-roles.sh"))
	run("postgres", "sh", filepath.Join(deployDB, "init-roles.sh")) // a second run changes nothing
	var withPassword []string
	rows, err := env.Store.Pool().Query(ctx, `SELECT rolname FROM pg_authid WHERE rolname LIKE 'gitfleet%' AND rolpassword IS NOT NULL
		AND NOT rolsuper ORDER BY rolname`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		withPassword = append(withPassword, r)
	}
	if want := []string{"gitfleet", "gitfleet_runner", "gitfleet_worker"}; !slices.Equal(withPassword, want) {
		t.Fatalf("roles with a password, not superusers: %v, want %v", withPassword, want)
	}

	owner := as("gitfleet")
	if _, err := owner.Migrate(ctx); err != nil {
		t.Fatalf("the owner migrates: %v", err)
	}
	run("gitfleet", psql, "-v", "ON_ERROR_STOP=1", "-q", "-f", filepath.Join(deployDB, "grants.sql"))

	worker, runner := as("gitfleet_worker"), as("gitfleet_runner")
	now := time.Now().UTC()
	self := snapshot.Runner{ID: "runner-roles", PeerAddr: "runner:5050", Capacity: 2}
	for _, st := range []*store.Store{worker, runner} {
		if s, err := st.Schema(ctx); err != nil || !s.Current() {
			t.Fatalf("schema check: %+v, %v", s, err)
		}
	}
	if err := runner.RegisterRunner(ctx, self); err != nil {
		t.Fatalf("runner: register: %v", err)
	}
	if err := runner.HeartbeatRunner(ctx, self.ID); err != nil {
		t.Fatalf("runner: heartbeat: %v", err)
	}
	if _, err := worker.PutUser(ctx, store.NewUser{Name: "alice", APIURL: "https://api.test/", Login: "alice", GitHubID: 1,
		TokenSealed: []byte("sealed-sentinel")}); err != nil {
		t.Fatalf("worker: add a user: %v", err)
	}
	snap, _, err := worker.CreateSnapshot(ctx, snapshot.Snapshot{Name: "roles", Kind: snapshot.KindImage, ImageRef: "reg.example.com/roles:1"}, now)
	if err != nil {
		t.Fatalf("worker: create a snapshot: %v", err)
	}
	if _, _, err := worker.InsertSnapshotRunner(ctx, self.ID, snap.Name, snapshot.RowPulling, now); err != nil {
		t.Fatalf("worker: place it: %v", err)
	}
	if err := runner.SetSnapshotRunnerProgress(ctx, self.ID, snap.Name, 5, 10, "registry", now); err != nil {
		t.Fatalf("runner: progress: %v", err)
	}
	var done int64
	if err := worker.Pool().QueryRow(ctx, `SELECT bytes_done FROM snapshot_runners WHERE runner_id = $1`, self.ID).Scan(&done); err != nil || done != 5 {
		t.Fatalf("the runner's progress: %d, %v", done, err)
	}

	denied := func(who string, st *store.Store, sql string) {
		t.Helper()
		_, err := st.Pool().Exec(ctx, sql)
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || pg.Code != "42501" {
			t.Errorf("%s: %s: %v, want permission denied (42501)", who, sql, err)
		}
	}
	for _, sql := range []string{
		`SELECT token_sealed FROM users`,
		`SELECT * FROM findings`,
		`SELECT * FROM snapshots`,
		`DELETE FROM runners`,
		`CREATE TABLE runner_owned (x int)`,
	} {
		denied("runner", runner, sql)
	}
	for _, sql := range []string{`CREATE TABLE worker_owned (x int)`, `DROP TABLE users`, `ALTER TABLE findings ADD COLUMN x int`} {
		denied("worker", worker, sql)
	}

	// Every table the migrations made is the workers' to read and write;
	// the runners' privileges are exactly grants.sql's.
	runnerGrants := map[string][]string{"goose_db_version": {"SELECT"}, "runners": {"SELECT", "INSERT", "UPDATE"},
		"snapshot_runners": {"SELECT", "UPDATE"}}
	tables, err := owner.Pool().Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		if err := tables.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if len(names) < 10 {
		t.Fatalf("tables: %v", names)
	}
	for _, table := range names {
		for _, priv := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"} {
			for role, want := range map[string]bool{
				"gitfleet_worker": priv == "SELECT" || priv == "INSERT" || priv == "UPDATE" || priv == "DELETE",
				"gitfleet_runner": slices.Contains(runnerGrants[table], priv),
			} {
				var has bool
				if err := owner.Pool().QueryRow(ctx, `SELECT has_table_privilege($1, $2, $3)`, role, "public."+table, priv).Scan(&has); err != nil {
					t.Fatal(err)
				}
				if has != want {
					t.Errorf("%s on %s: %s %t, want %t", role, table, priv, has, want)
				}
			}
		}
	}
}
