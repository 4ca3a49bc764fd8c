package temporalcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// cliPath returns the Temporal CLI; without it the tests fail (CI installs it).
func cliPath(t *testing.T) string {
	t.Helper()
	p, err := Find()
	if err != nil {
		t.Fatalf("Temporal CLI not installed: %v", err)
	}
	return p
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// dial connects an SDK client to the dev server, independently of the one
// StartDevServer used.
func dial(t *testing.T, ctx context.Context, addr string) (client.Client, client.NamespaceClient) {
	t.Helper()
	opts := client.Options{HostPort: addr, Logger: quietLogger}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	nc, err := client.NewNamespaceClient(opts)
	if err != nil {
		t.Fatalf("namespace client for %s: %v", addr, err)
	}
	t.Cleanup(nc.Close)
	return c, nc
}

func TestDevServerHeadlessInMemory(t *testing.T) {
	path := cliPath(t)
	t.Parallel()
	ctx := testContext(t)
	var stderr bytes.Buffer
	srv, err := StartDevServer(ctx, DevServerOptions{
		Path:             path,
		UIPort:           -1,
		Namespaces:       []string{"gitfleet-test"},
		SearchAttributes: map[string]string{"GitfleetRepo": "Keyword", "GitfleetAttempt": "Int"},
		Stderr:           &stderr,
		Logf:             t.Logf,
	})
	if err != nil {
		t.Fatalf("StartDevServer: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	if srv.UIURL() != "" {
		t.Errorf("UIURL() = %q for a headless server, want empty", srv.UIURL())
	}
	if !strings.HasPrefix(srv.Address(), "127.0.0.1:") {
		t.Errorf("Address() = %q, want 127.0.0.1:PORT", srv.Address())
	}

	c, nc := dial(t, ctx, srv.Address())
	desc, err := nc.Describe(ctx, "gitfleet-test")
	if err != nil {
		t.Fatalf("DescribeNamespace(gitfleet-test): %v", err)
	}
	if got := desc.GetNamespaceInfo().GetName(); got != "gitfleet-test" {
		t.Errorf("described namespace %q, want gitfleet-test", got)
	}
	var notFound *serviceerror.NamespaceNotFound
	if _, err := nc.Describe(ctx, "no-such-namespace"); !errors.As(err, &notFound) {
		t.Errorf("DescribeNamespace(no-such-namespace) = %v, want NamespaceNotFound", err)
	}

	attrs, err := c.OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: "gitfleet-test"})
	if err != nil {
		t.Fatalf("ListSearchAttributes: %v", err)
	}
	got := attrs.GetCustomAttributes()
	for name, typ := range map[string]enums.IndexedValueType{
		"GitfleetRepo":    enums.INDEXED_VALUE_TYPE_KEYWORD,
		"GitfleetAttempt": enums.INDEXED_VALUE_TYPE_INT,
	} {
		if got[name] != typ {
			t.Errorf("search attribute %s has type %v, want %v (all: %v)", name, got[name], typ, got)
		}
	}

	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	// The SDK retries an unavailable server until the deadline.
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := c.CheckHealth(hctx, &client.CheckHealthRequest{}); err == nil {
		t.Error("server still answers after Stop")
	}
}

func TestDevServerPersistentWithUI(t *testing.T) {
	path := cliPath(t)
	t.Parallel()
	ctx := testContext(t)
	db := filepath.Join(t.TempDir(), "state", "temporal.db")

	srv, err := StartDevServer(ctx, DevServerOptions{
		Path:       path,
		DBFile:     db,
		Namespaces: []string{"kept"},
		Logf:       t.Logf,
	})
	if err != nil {
		t.Fatalf("StartDevServer: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	if srv.UIURL() == "" {
		t.Fatal("UIURL() is empty with the UI enabled")
	}
	// The UI may come up slightly after the frontend.
	var uiErr error
	for i := 0; i < 100; i++ {
		var resp *http.Response
		if resp, uiErr = http.Get(srv.UIURL()); uiErr == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				uiErr = fmt.Errorf("status %s", resp.Status)
			}
		}
		if uiErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if uiErr != nil {
		t.Errorf("UI at %s: %v", srv.UIURL(), uiErr)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("DB file: %v", err)
	}

	// Restart on the same file without asking for the namespace: it must
	// still be there.
	srv2, err := StartDevServer(ctx, DevServerOptions{Path: path, DBFile: db, UIPort: -1, Logf: t.Logf})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer srv2.Stop()
	_, nc := dial(t, ctx, srv2.Address())
	if _, err := nc.Describe(ctx, "kept"); err != nil {
		t.Errorf("namespace created before the restart: %v", err)
	}
}

func TestStartDevServerErrors(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	bad := filepath.Join(t.TempDir(), "temporal")
	_, err := StartDevServer(ctx, DevServerOptions{Path: bad})
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), InstallCommand) {
		t.Errorf("bad Path: err = %v, want it to name the path and the install command", err)
	}

	// A "CLI" that fails at once: the error includes its output.
	fake := filepath.Join(t.TempDir(), "temporal")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'temporal version 0.9.0 (Server x, UI y)'; exit 0; fi\necho 'boom: cannot start' >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	_, err = StartDevServer(ctx, DevServerOptions{Path: fake, UIPort: -1, Logf: func(f string, a ...any) {
		warnings = append(warnings, fmt.Sprintf(f, a...))
	}})
	if err == nil || !strings.Contains(err.Error(), "boom: cannot start") || !strings.Contains(err.Error(), "exited during startup") {
		t.Errorf("failing CLI: err = %v, want the exit and its output", err)
	}
	if !strings.Contains(strings.Join(warnings, "\n"), "version 0.9.0") {
		t.Errorf("no version warning for a 0.9.0 CLI; logged: %q", warnings)
	}

	_, err = StartDevServer(ctx, DevServerOptions{Path: fake, SearchAttributes: map[string]string{"X": "String"}})
	if err == nil || !strings.Contains(err.Error(), "KeywordList") {
		t.Errorf("bad search attribute type: err = %v", err)
	}
}

func TestInstalledVersion(t *testing.T) {
	path := cliPath(t)
	t.Parallel()
	v, err := InstalledVersion(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is version %s", path, v)
	if v != Version {
		t.Logf("warning: installed CLI is %s, pinned is %s", v, Version)
	}
}

func TestFind(t *testing.T) {
	// Not parallel: it changes the environment.
	tmp := t.TempDir()
	fake := filepath.Join(tmp, "custom-temporal")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Setenv("TEMPORAL_CLI", fake)
	if got, err := Find(); err != nil || got != fake {
		t.Errorf("Find with $TEMPORAL_CLI = %q, %v; want %q", got, err, fake)
	}

	t.Setenv("TEMPORAL_CLI", filepath.Join(tmp, "nope"))
	_, err := Find()
	if err == nil || !strings.Contains(err.Error(), "TEMPORAL_CLI") || !strings.Contains(err.Error(), InstallCommand) {
		t.Errorf("bad $TEMPORAL_CLI: err = %v, want it to name TEMPORAL_CLI and %q", err, InstallCommand)
	}

	// Not on PATH: found in $GOPATH/bin.
	t.Setenv("TEMPORAL_CLI", "")
	t.Setenv("PATH", filepath.Join(tmp, "empty-path"))
	t.Setenv("GOBIN", "")
	gopath := filepath.Join(tmp, "gopath")
	if err := os.MkdirAll(filepath.Join(gopath, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	inGopath := filepath.Join(gopath, "bin", "temporal")
	if err := os.WriteFile(inGopath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOPATH", gopath)
	if got, err := Find(); err != nil || got != inGopath {
		t.Errorf("Find via $GOPATH = %q, %v; want %q", got, err, inGopath)
	}

	// No GOPATH: ~/go/bin.
	t.Setenv("GOPATH", "")
	home := filepath.Join(tmp, "home")
	t.Setenv("HOME", home)
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), InstallCommand) || !strings.Contains(err.Error(), filepath.Join(home, "go", "bin", "temporal")) {
		t.Errorf("nothing installed: err = %v, want the install command and the paths tried", err)
	} else {
		t.Logf("got expected error: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(home, "go", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	inHome := filepath.Join(home, "go", "bin", "temporal")
	if err := os.WriteFile(inHome, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Find(); err != nil || got != inHome {
		t.Errorf("Find via ~/go/bin = %q, %v; want %q", got, err, inHome)
	}
}

func TestTailWriter(t *testing.T) {
	tw := &tailWriter{max: 3}
	fmt.Fprint(tw, "a\nb\n")
	fmt.Fprint(tw, "c\nd\ne")
	if got, want := tw.String(), "b\nc\nd\ne"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
}

const helperEnv = "TEMPORALCLI_TEST_HELPER_CLI"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		srv, err := StartDevServer(context.Background(), DevServerOptions{Path: path, UIPort: -1})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(srv.cmd.Process.Pid)
		os.Exit(0) // without Stop
	}
	os.Exit(m.Run())
}

// running reports whether pid is a live (non-zombie) process.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
