package mirror

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/reach"
)

func TestMain(m *testing.M) {
	// The tests' remotes are httptest servers on loopback, listed here as
	// `starter dev` lists its forge; the egress tests narrow it themselves.
	h, err := reach.ParseHosts([]string{"127.0.0.1", "::1", "localhost"})
	if err != nil {
		panic(err)
	}
	reach.SetHosts(h)
	os.Exit(m.Run())
}

// withHosts sets the process's allowed hosts for one test.
func withHosts(t *testing.T, list ...string) {
	t.Helper()
	h, err := reach.ParseHosts(list)
	if err != nil {
		t.Fatal(err)
	}
	old := reach.Current()
	reach.SetHosts(h)
	t.Cleanup(func() { reach.SetHosts(old) })
}

// A remote the allowed hosts do not list is refused, Permanent, before a
// connection is made, on every path that reaches a remote (the probe,
// go-git's listing and fetches by SHA): an address the request names
// (169.254.169.254, a loopback address), or a name that resolves to a
// loopback address (as DNS rebinding would make it). A listener that
// would answer sees no connection.
func TestRemotesOutsideTheAllowedHostsAreRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	withHosts(t, "*", "git.example") // any public host, and one by name

	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, url := range []string{
		"http://169.254.169.254/latest/meta-data.git",
		"http://127.0.0.1:" + port + "/acme/app.git",
		"http://localhost:" + port + "/acme/app.git",
		"http://[::ffff:127.0.0.1]:" + port + "/acme/app.git",
	} {
		for name, op := range map[string]func() error{
			"sync":         func() error { _, err := m.Sync(context.Background(), url); return err },
			"list":         func() error { _, err := ListRefs(context.Background(), url); return err },
			"has commit":   func() error { _, err := m.HasCommit(context.Background(), url, sha); return err },
			"fetch commit": func() error { _, err := m.FetchCommit(context.Background(), url, sha, "refs/gitfleet/x"); return err },
			"snapshot": func() error {
				_, _, err := FetchSnapshot(context.Background(), url, sha, t.TempDir())
				return err
			},
		} {
			err := op()
			c := errclass.Classify(err)
			if err == nil || c.Class != errclass.Permanent || !errors.Is(err, reach.ErrRefused) ||
				!strings.Contains(err.Error(), "is not in GITFLEET_ALLOWED_HOSTS") {
				t.Errorf("%s %s: %v (%+v), want Permanent, not in GITFLEET_ALLOWED_HOSTS", name, url, err, c)
			}
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the listener accepted %d connections", n)
	}
}

// Only http(s) remotes: a file URL names the worker's own disk.
func TestRemotesAreHTTP(t *testing.T) {
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"file:///etc", "ssh://git@127.0.0.1/acme/app.git", "git://127.0.0.1/acme/app.git"} {
		_, err := ListRefs(context.Background(), url)
		if c := errclass.Classify(err); err == nil || c.Class != errclass.Permanent {
			t.Errorf("ListRefs(%s): %v, want Permanent", url, err)
		}
		if _, err := m.Sync(context.Background(), url); errclass.Classify(err).Class != errclass.Permanent {
			t.Errorf("Sync(%s): %v, want Permanent", url, err)
		}
	}
}
