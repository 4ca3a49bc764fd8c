package store_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/store"
)

// pgbouncer starts PgBouncer in transaction mode in front of the test
// cluster, with poolSize server connections, as compose runs it
// (deploy/pgbouncer/pgbouncer.ini), and returns its URL for database.
func pgbouncer(t *testing.T, database string, poolSize int) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/pgbouncer"); e != nil {
			t.Fatal("pgbouncer is not installed: apt-get install pgbouncer")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "pgbouncer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// The test cluster trusts local connections; compose's PgBouncer
	// authenticates each role (scram-sha-256, deploy/pgbouncer).
	ini := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = %d
max_client_conn = 200
server_reset_query =
`, env.PG.Port(), port, poolSize)
	path := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(path, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, path)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if u.Uid == "0" { // PgBouncer refuses to run as root
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and no postgres user to run pgbouncer as: %v", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pgbouncer:\n%s", out.String())
		}
	})
	// PgBouncer listening is the event; the minute bounds only a failure.
	poll.Until(t, "pgbouncer listens", time.Minute, func() (bool, string) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false, err.Error() + "\n" + out.String()
		}
		_ = c.Close()
		return true, ""
	})
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", "postgres", port, database)
}

// Workers, runners and the starter reach PostgreSQL through PgBouncer in
// transaction mode (docker-compose.yml), with default_query_exec_mode=
// cache_describe in DATABASE_URL: no named prepared statement, so a server
// connection may serve another client at the next transaction. Many
// clients on two server connections run the scan's writes and lookups,
// the fence checks, a finalize and checkpoint, the fleet summary (SET
// LOCAL), an alert's send reservation (a transaction-scoped advisory lock)
// and the cleanup: all succeed, each scope sees its own blobs. The same
// through pgx's default (named prepared statements) fails: the control.
func TestThroughPgBouncerInTransactionMode(t *testing.T) {
	ctx := context.Background()
	scratchDB := cleanupDB(t, "c_pgbouncer")
	scratchDB.Close()
	base := pgbouncer(t, "c_pgbouncer", 2)

	st, err := store.Open(ctx, base+"&default_query_exec_mode=cache_describe&pool_max_conns=8")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- bouncerWorkload(ctx, st, i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	// The control: pgx's default prepares named statements, which another
	// client meets on the shared server connection.
	def, err := store.Open(ctx, base+"&pool_max_conns=8")
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	failed := make(chan error, 8)
	var wg2 sync.WaitGroup
	for i := range 8 {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			failed <- bouncerWorkload(ctx, def, 100+i)
		}()
	}
	wg2.Wait()
	close(failed)
	var n int
	for err := range failed {
		if err != nil {
			if n == 0 {
				t.Logf("the control fails as expected: %v", err)
			}
			n++
		}
	}
	if n == 0 {
		t.Error("with named prepared statements through PgBouncer nothing failed: the control shows nothing")
	}
}

func bouncerWorkload(ctx context.Context, st *store.Store, i int) error {
	for round := range 3 {
		id, err := st.EnsureShard(ctx, shard.Spec{Key: fmt.Sprintf("target:bouncer-%d-%d", i, round), Target: target.Target{Location: "https://h/o/r"}})
		if err != nil {
			return fmt.Errorf("ensure: %w", err)
		}
		scope, err := st.Scope(ctx, id, "p")
		if err != nil {
			return fmt.Errorf("scope: %w", err)
		}
		c, err := st.AcquireShard(ctx, id, "o", time.Minute, true)
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		ids := blobIDs(i*10000+round*1000, 300)
		if _, err := st.WriteData(ctx, c.Lease, scope, seenOps(ids, store.OutcomeScanned)); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		seen, err := st.SeenBlobs(ctx, scope, ids)
		if err != nil || len(seen) != len(ids) {
			return fmt.Errorf("seen %d of %d: %v", len(seen), len(ids), err)
		}
		r, err := st.Finalize(ctx, store.FinalizeInput{Lease: c.Lease, ScopeID: scope, Complete: true, Watermarks: map[string]string{"main": "c"}})
		if err != nil {
			return fmt.Errorf("finalize: %w", err)
		}
		if _, err := st.Checkpoint(ctx, c.Lease, r.ID); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if _, err := st.Summary(ctx, store.FleetFilter{}, 5); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		if _, err := st.ReserveSend(ctx, fmt.Sprintf("receiver-%d", i%2), 1000); err != nil {
			return fmt.Errorf("reserve a send: %w", err)
		}
		if _, _, _, err := st.CleanupStep(ctx, store.CleanupPlan{Now: time.Now()}, store.CleanupCursor{}); err != nil {
			return fmt.Errorf("cleanup: %w", err)
		}
	}
	return nil
}
