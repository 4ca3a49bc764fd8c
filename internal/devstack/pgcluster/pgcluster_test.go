package pgcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// needPostgres fails tests when no PostgreSQL server is installed (CI
// installs one).
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := FindBinDir(""); err != nil {
		t.Fatalf("no PostgreSQL server binaries: %v", err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, ctx context.Context, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestStartCreateRestart(t *testing.T) {
	needPostgres(t)
	t.Parallel()
	ctx := testContext(t)
	dir := filepath.Join(t.TempDir(), "pgdata")

	var initdbRuns int
	logf := func(format string, args ...any) {
		if strings.Contains(format, "initializing new cluster") {
			initdbRuns++
		}
		t.Logf(format, args...)
	}

	c := start(t, ctx, Options{DataDir: dir, Logf: logf})
	if c.Port() == 0 {
		t.Fatal("Port() = 0")
	}
	wantURL := "postgres://postgres@127.0.0.1:" + strconv.Itoa(c.Port()) + "/app?sslmode=disable"
	if got := c.URL("app"); got != wantURL {
		t.Errorf("URL = %q, want %q", got, wantURL)
	}
	if _, err := os.Stat(filepath.Join(dir, LogFileName)); err != nil {
		t.Errorf("server log: %v", err)
	}

	const db = `app`
	if err := c.CreateDatabase(ctx, db); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	if err := c.CreateDatabase(ctx, db); err != nil {
		t.Fatalf("CreateDatabase again (must be idempotent): %v", err)
	}
	// A name that needs quoting.
	const odd = `odd-"name" x`
	if err := c.CreateDatabase(ctx, odd); err != nil {
		t.Fatalf("CreateDatabase(%q): %v", odd, err)
	}
	connect(t, ctx, c.URL(odd)).Close(ctx)
	if err := c.DropDatabase(ctx, odd); err != nil {
		t.Fatalf("DropDatabase: %v", err)
	}
	if err := c.DropDatabase(ctx, odd); err != nil {
		t.Fatalf("DropDatabase of a missing database: %v", err)
	}

	conn := connect(t, ctx, c.URL(db))
	if _, err := conn.Exec(ctx, `CREATE TABLE repos (name text PRIMARY KEY); INSERT INTO repos VALUES ('gitfleet')`); err != nil {
		t.Fatalf("create table: %v", err)
	}
	conn.Close(ctx)

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err == nil {
		t.Error("postmaster.pid left behind after Stop")
	}

	// Leave a stale postmaster.pid naming a process that is gone, as a
	// crashed run would.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := strconv.Itoa(dead.ProcessState.Pid()) + "\n" + dir + "\n0\n5432\n/tmp\n127.0.0.1\n  5432001    0\nready   \n"
	if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}

	c2 := start(t, ctx, Options{DataDir: dir, Logf: logf})
	var name string
	if err := connect(t, ctx, c2.URL(db)).QueryRow(ctx, `SELECT name FROM repos`).Scan(&name); err != nil {
		t.Fatalf("query after restart: %v", err)
	}
	if name != "gitfleet" {
		t.Errorf("name = %q, want gitfleet", name)
	}
	if initdbRuns != 1 {
		t.Errorf("initdb ran %d times, want 1", initdbRuns)
	}
	if err := c2.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestRestartAfterCrash(t *testing.T) {
	needPostgres(t)
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()

	c := start(t, ctx, Options{DataDir: dir})
	if err := c.CreateDatabase(ctx, "crash"); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, ctx, c.URL("crash"))
	if _, err := conn.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	// Simulate a crash: the postmaster dies without cleaning up.
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.proc.Done()
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err != nil {
		t.Fatalf("expected a stale postmaster.pid after the crash: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop after crash: %v", err)
	}

	// The crashed postmaster's children may take a moment to notice.
	var c2 *Cluster
	var err error
	for i := 0; ; i++ {
		c2, err = Start(ctx, Options{DataDir: dir, Logf: t.Logf})
		if err == nil || i == 20 {
			break
		}
		t.Logf("restart attempt %d: %v", i, err)
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Start after crash: %v", err)
	}
	defer c2.Stop()
	var v int
	if err := connect(t, ctx, c2.URL("crash")).QueryRow(ctx, `SELECT v FROM t`).Scan(&v); err != nil || v != 42 {
		t.Fatalf("after crash recovery: v=%d err=%v", v, err)
	}
}

func TestEphemeralAndRunningDir(t *testing.T) {
	needPostgres(t)
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	c := start(t, ctx, Options{DataDir: dir, Ephemeral: true})
	var fsync string
	if err := connect(t, ctx, c.URL("postgres")).QueryRow(ctx, `SHOW fsync`).Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %q with Ephemeral, want off", fsync)
	}
	// A second server on the same directory must be refused clearly.
	_, err := Start(ctx, Options{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Start on a running data dir: err = %v, want an 'in use' error", err)
	}
}

func TestPortInUse(t *testing.T) {
	needPostgres(t)
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = Start(testContext(t), Options{DataDir: t.TempDir(), Port: port})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("Start on a busy port: err = %v, want 'already in use'", err)
	}
	t.Logf("got expected error: %v", err)
}

func TestBadBinDir(t *testing.T) {
	t.Parallel()
	bad := t.TempDir()
	_, err := Start(context.Background(), Options{DataDir: t.TempDir(), BinDir: bad})
	if err == nil {
		t.Fatal("Start with a bad BinDir succeeded")
	}
	for _, want := range []string{bad, "initdb", "apt-get install postgresql"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := FindBinDir(filepath.Join(bad, "missing")); err == nil {
		t.Error("FindBinDir of a missing directory succeeded")
	}
}

func TestFindBinDirEnv(t *testing.T) {
	needPostgres(t)
	dir, err := FindBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PG_BIN", dir)
	if got, err := FindBinDir(""); err != nil || got != dir {
		t.Errorf("FindBinDir with $PG_BIN=%s = %q, %v", dir, got, err)
	}
	t.Setenv("PG_BIN", t.TempDir())
	if _, err := FindBinDir(""); err == nil || !strings.Contains(err.Error(), "PG_BIN") {
		t.Errorf("bad $PG_BIN: err = %v, want an error naming PG_BIN", err)
	}
}

func TestNewestSystemBinDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "13", "15", "notaversion"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if v == "15" {
			continue // incomplete install: no binaries
		}
		for _, name := range requiredBinaries {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := newestSystemBinDir(root), filepath.Join(root, "13", "bin"); got != want {
		t.Errorf("newestSystemBinDir = %q, want %q", got, want)
	}
}

func TestStartErrorIncludesLog(t *testing.T) {
	needPostgres(t)
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	c := start(t, ctx, Options{DataDir: dir, Ephemeral: true})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\nshared_buffers = 'not a size'\n")
	f.Close()
	_, err = Start(ctx, Options{DataDir: dir, Logf: t.Logf})
	if err == nil {
		t.Fatal("Start with a broken postgresql.conf succeeded")
	}
	for _, want := range []string{"exited during startup", LogFileName, "shared_buffers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error does not mention %q:\n%v", want, err)
		}
	}
	t.Logf("got expected error: %v", err)
}

const helperEnv = "PGCLUSTER_TEST_HELPER_DATADIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		c, err := Start(context.Background(), Options{DataDir: dir, Ephemeral: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(c.cmd.Process.Pid, c.sockDir)
		os.Exit(0) // without Stop
	}
	os.Exit(m.Run())
}
