package activities_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// Presence follows the tips: a secret renamed unchanged is still present,
// one only a deleted tag held is removed, one deleted everywhere is
// removed, a tip that did not move keeps what it held, and a secret
// restored at another path, deleted again, and then held by a branch from
// before the deletion is present. It holds both ways presence is found: at
// the paths the walks recorded, and through the tips' whole trees (a scope
// older than the recorded paths).
func TestFindingPresenceAtTheTips(t *testing.T) {
	for _, wholeTrees := range []bool{false, true} {
		t.Run(map[bool]string{false: "paths", true: "whole trees"}[wholeTrees], func(t *testing.T) {
			testFindingPresence(t, wholeTrees)
		})
	}
}

func testFindingPresence(t *testing.T, wholeTrees bool) {
	s := shards(t, time.Minute, 10)
	dir := t.TempDir()
	n := 0
	git := func(args ...string) string {
		t.Helper()
		n++
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		date := fmt.Sprintf("@%d +0000", 1700000000+60*n)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date, "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	moved := gittest.FakePAT("Mv4")
	tagged := gittest.FakePAT("Tg8")
	git("init", "--quiet", "--initial-branch=main")
	write("a/b/key.txt", "k="+moved+"\n")
	write("c.txt", "t="+tagged+"\n")
	git("add", ".")
	git("commit", "--quiet", "-m", "one")
	git("tag", "-a", "-m", "release", "v1")
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	git("mv", "a/b/key.txt", "d/key.txt")
	write("c.txt", "nothing here\n")
	git("add", ".")
	git("commit", "--quiet", "-m", "two")

	spec, shardID := localShard(t, s, dir)
	scanned := func() map[string]store.PresenceStatus {
		t.Helper()
		if wholeTrees {
			scope, err := env.Store.Scope(context.Background(), shardID, s.Scanner.Policy())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE scan_scopes SET paths_complete = false WHERE id = $1`, scope); err != nil {
				t.Fatal(err)
			}
		}
		r, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: lease(t, s, shardID, "o"), Spec: spec})
		if err != nil || !r.Complete {
			t.Fatalf("scan: %+v, %v", r, err)
		}
		scope, err := env.Store.LatestScope(context.Background(), shardID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := env.Store.Secrets(context.Background(), scope, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]store.PresenceStatus{}
		for _, x := range p.Secrets {
			got[x.Path] = x.Status
		}
		return got
	}
	steps := []struct {
		name   string
		change func()
		want   map[string]store.PresenceStatus
	}{
		{"renamed on main, both in the tag", func() {},
			map[string]store.PresenceStatus{"a/b/key.txt": store.Present, "c.txt": store.Present}},
		{"the tag deleted", func() { git("tag", "-d", "v1") },
			map[string]store.PresenceStatus{"a/b/key.txt": store.Present, "c.txt": store.Removed}},
		{"nothing moved", func() {},
			map[string]store.PresenceStatus{"a/b/key.txt": store.Present, "c.txt": store.Removed}},
		{"the key deleted on main, kept on a branch", func() {
			git("rm", "--quiet", "d/key.txt")
			git("commit", "--quiet", "-m", "three")
			git("branch", "keep", "HEAD~1")
		}, map[string]store.PresenceStatus{"a/b/key.txt": store.Present, "c.txt": store.Removed}},
		{"the branch deleted", func() { git("branch", "-D", "keep") },
			map[string]store.PresenceStatus{"a/b/key.txt": store.Removed, "c.txt": store.Removed}},
		{"the key restored at another path", func() {
			write("f/restored.txt", "k="+moved+"\n")
			git("add", ".")
			git("commit", "--quiet", "-m", "four")
		}, map[string]store.PresenceStatus{"a/b/key.txt": store.Present, "c.txt": store.Removed}},
		{"deleted again", func() {
			git("rm", "--quiet", "f/restored.txt")
			git("commit", "--quiet", "-m", "five")
		}, map[string]store.PresenceStatus{"a/b/key.txt": store.Removed, "c.txt": store.Removed}},
		{"a branch from before the deletion", func() { git("branch", "old", "HEAD~1") },
			map[string]store.PresenceStatus{"a/b/key.txt": store.Present, "c.txt": store.Removed}},
	}
	for _, st := range steps {
		st.change()
		if got := scanned(); fmt.Sprint(got) != fmt.Sprint(st.want) {
			t.Errorf("%s: %v, want %v", st.name, got, st.want)
		}
	}
}
