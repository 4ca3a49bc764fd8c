package activities_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/workflows"
)

// manyRefsRepo is a bare repository of 4 commits, one new file each (the
// last holds a secret), and n branches on them besides main, packed as
// `git pack-refs --all` leaves them.
func manyRefsRepo(t testing.TB, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "refs.git")
	gittest.Git(t, "", nil, "init", "--quiet", "--bare", "--initial-branch=main", dir)
	git := func(stdin string, args ...string) string {
		return strings.TrimSpace(gittest.Git(t, dir, strings.NewReader(stdin), args...))
	}
	var commits []string
	entries := ""
	for i := range 4 {
		content := fmt.Sprintf("setting %d = %d\n", i, i*7)
		if i == 3 {
			content = "GH=" + ghToken + "\n"
		}
		blob := git(content, "hash-object", "-w", "--stdin")
		entries += fmt.Sprintf("100644 blob %s\tf%d.txt\n", blob, i)
		args := []string{"commit-tree", git(entries, "mktree"), "-m", fmt.Sprintf("c%d", i)}
		if len(commits) > 0 {
			args = append(args, "-p", commits[len(commits)-1])
		}
		commits = append(commits, git("", args...))
	}
	var cmds strings.Builder
	fmt.Fprintf(&cmds, "create refs/heads/main %s\n", commits[3])
	for i := range n {
		fmt.Fprintf(&cmds, "create refs/heads/b%06d %s\n", i, commits[i%4])
	}
	git(cmds.String(), "update-ref", "--stdin")
	git("", "pack-refs", "--all")
	git("", "repack", "-a", "-d", "-q")
	return dir
}

// A re-scan of a repository of many refs writes the watermarks of the refs
// that moved, not of every ref: 50,001 branches of which none moved
// rewrote 50,001 rows (issue 34: 9–11× gitleaks side by side). The rows a
// run rewrote are those whose xmin (the writing transaction) changed.
func TestManyRefsRescanWritesWhatMoved(t *testing.T) {
	refs := 2000
	if os.Getenv("GITFLEET_MANYREFS") != "" {
		refs = 50000
	}
	s := shards(t, time.Minute, 100)
	dir := manyRefsRepo(t, refs)
	spec, shardID := localShard(t, s, dir)
	ctx := context.Background()
	scanOnce := func(what string) {
		t.Helper()
		l := lease(t, s, shardID, "o")
		began := time.Now()
		r, err := s.ScanShard(ctx, workflows.ShardWork{Lease: l, Spec: spec})
		if err != nil || !r.Complete {
			t.Fatalf("%s: %+v, %v", what, r, err)
		}
		t.Logf("%s: %s", what, time.Since(began))
		if _, err := s.CheckpointShard(ctx, workflows.CheckpointInput{Lease: l, ReceiptID: r.ID}); err != nil {
			t.Fatalf("%s: checkpoint: %v", what, err)
		}
	}
	// xmins are the writing transactions of the shard's watermark rows.
	xmins := func() map[string]string {
		rows, err := env.Store.Pool().Query(ctx, `SELECT w.ref, w.xmin::text FROM shard_watermarks w
			JOIN scan_scopes s ON s.id = w.scope_id WHERE s.shard_id = $1`, shardID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]string{}
		for rows.Next() {
			var ref, x string
			if err := rows.Scan(&ref, &x); err != nil {
				t.Fatal(err)
			}
			m[ref] = x
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	rewritten := func(before, after map[string]string) []string {
		var out []string
		for ref, x := range after {
			if before[ref] != x {
				out = append(out, ref)
			}
		}
		return out
	}

	scanOnce("first scan")
	first := xmins()
	if len(first) != refs+1 {
		t.Fatalf("%d watermarks after the first scan, want %d", len(first), refs+1)
	}
	scanOnce("unchanged re-scan")
	if got := rewritten(first, xmins()); len(got) != 0 {
		t.Fatalf("an unchanged re-scan rewrote %d of %d watermarks, want none", len(got), refs+1)
	}
	addCommit(t, dir)
	before := xmins()
	scanOnce("re-scan after one commit on main")
	if got := rewritten(before, xmins()); len(got) != 1 || got[0] != "refs/heads/main" {
		t.Fatalf("a re-scan after one commit on main rewrote %d watermarks (%.3v), want main's alone", len(got), got)
	}
}
