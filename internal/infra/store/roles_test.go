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

	"gitfleet/internal/domain/placement"
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
	for _, role := range []string{"gitfleet", "gitfleet_worker", "gitfleet_starter", "gitfleet_runner"} {
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
	if want := []string{"gitfleet", "gitfleet_runner", "gitfleet_starter", "gitfleet_worker"}; !slices.Equal(withPassword, want) {
		t.Fatalf("roles with a password, not superusers: %v, want %v", withPassword, want)
	}

	owner := as("gitfleet")
	if _, err := owner.Migrate(ctx); err != nil {
		t.Fatalf("the owner migrates: %v", err)
	}
	run("gitfleet", psql, "-v", "ON_ERROR_STOP=1", "-q", "-f", filepath.Join(deployDB, "grants.sql"))

	worker, runner, starter := as("gitfleet_worker"), as("gitfleet_runner"), as("gitfleet_starter")
	now := time.Now().UTC()
	self := snapshot.Runner{ID: "runner-roles", PeerAddr: "runner:5050", Capacity: 2}
	for _, st := range []*store.Store{worker, runner, starter} {
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

	workersRowsAreTheirRoles(t, owner, worker, starter, as)

	// Every table the migrations made is the workers' and the starter's to
	// read and write, but for workers, which the starter only reads; the
	// runners' privileges are exactly grants.sql's.
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
				"gitfleet_worker":  priv == "SELECT" || priv == "INSERT" || priv == "UPDATE" || priv == "DELETE",
				"gitfleet_runner":  slices.Contains(runnerGrants[table], priv),
				"gitfleet_starter": priv == "SELECT" || (table != "workers" && (priv == "INSERT" || priv == "UPDATE" || priv == "DELETE")),
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

// workersRowsAreTheirRoles: a worker's row in workers is its database
// role's (migration 00047, row-level security). A second worker role — a
// deployment that gives each worker host credentials of its own makes one
// per host, a member of gitfleet_worker — can neither take over, heartbeat,
// leave nor forget the first one's live row, nor insert a row in another
// role's name; the starter's role cannot register a worker at all (it
// drains one through gitfleet_set_worker_state), so neither can attract
// Git work by writing a row. Before 00047 the second role took the row
// over.
func workersRowsAreTheirRoles(t *testing.T, owner, worker, starter *store.Store, as func(string) *store.Store) {
	ctx := context.Background()
	// Roles are the cluster's: the superuser makes it.
	if _, err := env.Store.Pool().Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gitfleet_worker_b') THEN
			CREATE ROLE gitfleet_worker_b LOGIN IN ROLE gitfleet_worker;
		END IF; END $$`); err != nil {
		t.Fatal(err)
	}
	other := as("gitfleet_worker_b")
	t.Cleanup(func() { _, _ = owner.Pool().Exec(ctx, `DELETE FROM workers WHERE id LIKE 'w-roles-%'`) })
	const id = "w-roles-a"
	row := func() (who string, mirrors int64, left bool) {
		t.Helper()
		if err := owner.Pool().QueryRow(ctx, `SELECT owner, mirrors, left_at IS NOT NULL FROM workers WHERE id = $1`, id).
			Scan(&who, &mirrors, &left); err != nil {
			t.Fatal(err)
		}
		return who, mirrors, left
	}
	denied := func(what string, err error) {
		t.Helper()
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || pg.Code != "42501" {
			t.Errorf("%s: %v, want refused (42501)", what, err)
		}
	}

	if err := worker.RegisterWorker(ctx, id, "gitfleet"); err != nil {
		t.Fatalf("worker: register: %v", err)
	}
	if err := worker.HeartbeatWorker(ctx, id, 3, 4096); err != nil {
		t.Fatalf("worker: heartbeat: %v", err)
	}
	denied("another worker role registers the row", other.RegisterWorker(ctx, id, "gitfleet"))
	if err := other.HeartbeatWorker(ctx, id, 9, 9); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another worker role heartbeats the row: %v, want not found (the row is hidden from its update)", err)
	}
	if err := other.LeaveWorker(ctx, id); err != nil {
		t.Errorf("another worker role: leave: %v", err)
	}
	_, err := other.Pool().Exec(ctx, `INSERT INTO workers (id, owner) VALUES ('w-roles-forged', 'gitfleet_worker')`)
	denied("another worker role inserts a row in the first one's name", err)
	if tag, err := other.Pool().Exec(ctx, `UPDATE workers SET owner = current_user, state = 'draining' WHERE id = $1`, id); err != nil || tag.RowsAffected() != 0 {
		t.Errorf("another worker role updates the row: %v, %d rows", err, tag.RowsAffected())
	}
	if tag, err := other.Pool().Exec(ctx, `DELETE FROM workers WHERE id = $1`, id); err != nil || tag.RowsAffected() != 0 {
		t.Errorf("another worker role deletes the row: %v, %d rows", err, tag.RowsAffected())
	}
	if ids, err := other.ForgetWorkers(ctx, 0); err != nil || len(ids) != 0 {
		t.Errorf("another worker role forgets the live row: %v, %v", ids, err)
	}
	if who, mirrors, left := row(); who != "gitfleet_worker" || mirrors != 3 || left {
		t.Errorf("the row after the other role's attempts: owner %s, %d mirrors, left %t; want gitfleet_worker's, 3, not left", who, mirrors, left)
	}
	if live, err := other.LiveWorkers(ctx, "gitfleet", time.Minute); err != nil || !slices.Contains(live, id) {
		t.Errorf("another worker role reads the live workers: %v, %v", live, err)
	}

	// The starter reads, drains and resumes; it writes no row.
	denied("the starter registers a worker", starter.RegisterWorker(ctx, "w-roles-starter", "gitfleet"))
	_, err = starter.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now()`)
	denied("the starter heartbeats a worker", err)
	_, err = starter.Pool().Exec(ctx, `DELETE FROM workers`)
	denied("the starter deletes workers", err)
	if err := starter.SetWorkerState(ctx, id, placement.Draining); err != nil {
		t.Errorf("the starter drains a worker: %v", err)
	}
	if err := starter.SetWorkerState(ctx, id, placement.Active); err != nil {
		t.Errorf("the starter resumes a worker: %v", err)
	}
	denied("a worker drains one", worker.SetWorkerState(ctx, id, placement.Draining))

	// A worker silent for two hours is forgotten by any worker role.
	if _, err := owner.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now() - interval '2 hours' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if ids, err := other.ForgetWorkers(ctx, time.Hour); err != nil || !slices.Equal(ids, []string{id}) {
		t.Errorf("another worker role forgets a row silent for two hours: %v, %v", ids, err)
	}
}
