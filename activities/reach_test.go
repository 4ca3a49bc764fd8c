package activities_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/reach"
	"gitfleet/workflows"
)

// narrow sets the process's allowed hosts and local root for one test
// (testenv allows loopback and every path).
func narrow(t *testing.T, hosts []string, root string) {
	t.Helper()
	h, err := reach.ParseHosts(hosts)
	if err != nil {
		t.Fatal(err)
	}
	oldHosts, oldRoot := reach.Current(), reach.LocalRoot()
	reach.SetHosts(h)
	reach.SetLocalRoot(root)
	t.Cleanup(func() { reach.SetHosts(oldHosts); reach.SetLocalRoot(oldRoot) })
}

// A scan target on a host GITFLEET_ALLOWED_HOSTS does not list — the
// metadata address, a loopback address, a name that resolves to one — is
// refused by the worker, Permanent, and no connection is made: a listener
// at the address sees nothing.
func TestScanTargetsOutsideTheAllowedHostsAreRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
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
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	narrow(t, []string{"*"}, "")

	s := shards(t, time.Minute, 100)
	if s.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{
		"http://169.254.169.254/x.git",
		"http://127.0.0.1:" + port + "/acme/app.git",
		"http://localhost:" + port + "/acme/app.git",
	} {
		n, err := target.Normalize([]target.Request{{Location: url}})
		if err != nil {
			t.Fatal(err)
		}
		spec := shard.Spec{Key: n.Targets[0].Key(), Target: n.Targets[0]}
		id, err := s.EnsureShard(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		w := workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec}
		_, err = s.SyncShardMirror(context.Background(), w)
		if !isClass(err, errclass.Permanent) || !strings.Contains(err.Error(), "is not in GITFLEET_ALLOWED_HOSTS") {
			t.Errorf("sync %s: %v, want Permanent, not in GITFLEET_ALLOWED_HOSTS", url, err)
		}
		if _, err = s.ScanShard(context.Background(), w); !isClass(err, errclass.Permanent) {
			t.Errorf("scan %s: %v, want Permanent", url, err)
		}
		t.Log(err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the listener accepted %d connections", n)
	}
}

// A local target is opened on a worker only under GITFLEET_LOCAL_ROOT,
// after its links are resolved: one outside, linked from inside to
// outside, or whose .git file names a repository outside, is refused
// (Permanent); one inside is scanned.
func TestLocalTargetsOnlyUnderTheLocalRoot(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "repos")
	spec := repogen.Spec{Commits: 3, FilesPerCommit: 2, BlobSize: 100, Seed: 5}
	inside, outside := filepath.Join(root, "in.git"), filepath.Join(base, "out.git")
	for _, d := range []string{inside, outside} {
		if _, err := repogen.Generate(d, spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "link.git")); err != nil {
		t.Fatal(err)
	}
	// A work tree inside whose .git file names the repository outside.
	escape := filepath.Join(root, "escape")
	if err := os.MkdirAll(escape, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(escape, ".git"), []byte("gitdir: "+outside+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := shards(t, time.Minute, 100)
	scan := func(dir string) error {
		spec, id := localShard(t, s, dir)
		_, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec})
		return err
	}
	narrow(t, nil, "")
	if err := scan(inside); !isClass(err, errclass.Permanent) || !strings.Contains(err.Error(), "GITFLEET_LOCAL_ROOT is not set") {
		t.Errorf("no root: %v, want Permanent, GITFLEET_LOCAL_ROOT is not set", err)
	}
	narrow(t, nil, root)
	for _, dir := range []string{outside, filepath.Join(root, "link.git"), filepath.Join(root, "..", "out.git"), escape} {
		if err := scan(dir); !isClass(err, errclass.Permanent) || !strings.Contains(err.Error(), "not under GITFLEET_LOCAL_ROOT") {
			t.Errorf("%s: %v, want Permanent, not under GITFLEET_LOCAL_ROOT", dir, err)
		}
	}
	if err := scan(inside); err != nil {
		t.Errorf("inside the root: %v", err)
	}
}
