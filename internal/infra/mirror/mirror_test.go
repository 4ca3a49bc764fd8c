package mirror

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/infra/errclass"
)

func setup(t *testing.T) (*forge.Forge, *Mirrors) {
	t.Helper()
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fg.Close() })
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return fg, m
}

func mustCommit(t *testing.T, fg *forge.Forge, owner, name, file string) string {
	t.Helper()
	sha, err := fg.Commit(owner, name, "main", map[string]string{file: file + " content\n"}, "add "+file)
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

func TestSyncFollowsTheRemote(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, fg, "acme", "app", "a.txt")
	url := fg.CloneURL("acme", "app")

	r, err := m.Sync(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if r.Head != c1 || r.DefaultBranch != "main" || r.Empty || r.URL != fg.URL()+"/acme/app.git" {
		t.Fatalf("first sync = %+v, want head %s", r, c1)
	}
	c2 := mustCommit(t, fg, "acme", "app", "b.txt")
	if r, err = m.Sync(ctx, url); err != nil || r.Head != c2 {
		t.Fatalf("second sync = %+v, %v; want head %s", r, err, c2)
	}
	repo, err := m.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil || ref.Hash().String() != c2 {
		t.Fatalf("mirror main = %v, %v; want %s", ref, err, c2)
	}
	if _, err := repo.CommitObject(plumbing.NewHash(c1)); err != nil {
		t.Fatalf("mirror lacks the first commit: %v", err)
	}

	// A force push rewrites the branch; the mirror follows it.
	c3, err := fg.ForcePush("acme", "app", "main", map[string]string{"c.txt": "new history\n"}, "rewrite")
	if err != nil {
		t.Fatal(err)
	}
	if r, err = m.Sync(ctx, url); err != nil || r.Head != c3 {
		t.Fatalf("sync after force push = %+v, %v; want head %s", r, err, c3)
	}
}

func TestResolveFollowsRenames(t *testing.T) {
	fg, m := setup(t)
	if _, err := fg.CreateRepo("acme", "old"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, fg, "acme", "old", "a.txt")
	if err := fg.Rename("acme", "old", "new"); err != nil {
		t.Fatal(err)
	}
	if err := fg.Transfer("acme", "new", "other"); err != nil {
		t.Fatal(err)
	}
	r, err := m.Sync(context.Background(), fg.CloneURL("acme", "old"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fg.URL() + "/other/new.git"; r.URL != want {
		t.Fatalf("resolved URL = %s, want %s", r.URL, want)
	}
}

func TestHasCommit(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, fg, "acme", "app", "a.txt")
	mustCommit(t, fg, "acme", "app", "b.txt")
	url := fg.CloneURL("acme", "app")
	// A mirror holding c1 must not answer for the remote.
	if _, err := m.Sync(ctx, url); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.HasCommit(ctx, url, c1); err != nil || !ok {
		t.Fatalf("HasCommit(reachable) = %v, %v", ok, err)
	}
	if _, err := fg.ForcePush("acme", "app", "main", map[string]string{"x": "y"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.HasCommit(ctx, url, c1); err != nil || ok {
		t.Fatalf("HasCommit(force-pushed away) = %v, %v; want false", ok, err)
	}
	_, err := m.HasCommit(ctx, url, "not-a-sha")
	if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent {
		t.Fatalf("HasCommit(bad sha) error = %v, want Permanent", err)
	}
	entries, _ := os.ReadDir(filepath.Join(m.root, "tmp"))
	if len(entries) != 0 {
		t.Fatalf("scratch repositories left behind: %d", len(entries))
	}
}

func TestSyncEdgeCases(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "empty"); err != nil {
		t.Fatal(err)
	}
	r, err := m.Sync(ctx, fg.CloneURL("acme", "empty"))
	if err != nil || !r.Empty || r.Head != "" {
		t.Fatalf("empty repository: %+v, %v", r, err)
	}

	_, err = m.Sync(ctx, fg.CloneURL("acme", "missing"))
	if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent {
		t.Fatalf("missing repository: %v, want Permanent", err)
	}

	if _, err := fg.CreateRepo("acme", "secret"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, fg, "acme", "secret", "a")
	if err := fg.SetPrivate("acme", "secret", true); err != nil {
		t.Fatal(err)
	}
	_, err = m.Sync(ctx, fg.CloneURL("acme", "secret"))
	if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent || c.Reason != errclass.ReasonPermissionDenied {
		t.Fatalf("private repository: %v (%+v), want Permanent permission denied", err, c)
	}

	fault := fg.AddFault(forge.Fault{Kind: forge.Git, Status: 503})
	_, err = m.Sync(ctx, fg.CloneURL("acme", "empty"))
	fault()
	if c := errclass.Classify(err); c == nil || c.Class != errclass.Retryable {
		t.Fatalf("503 from the git host: %v, want Retryable", err)
	}
}

func TestConcurrentSyncsAndDamagedMirror(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	head := mustCommit(t, fg, "acme", "app", "a.txt")
	url := fg.CloneURL("acme", "app")
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	// A second Mirrors on the same root stands in for another process.
	other, _ := New(m.root, nil)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := []*Mirrors{m, other}[i%2].Sync(ctx, url)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, mm := range []*Mirrors{m, other} {
		if n := len(mm.locks); n != 0 {
			t.Fatalf("%d lock entries left after the syncs, want none", n)
		}
	}

	// Damage the mirror: the next sync rebuilds it.
	if err := os.WriteFile(filepath.Join(m.Path(url), "HEAD"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(m.Path(url), "objects", "pack", "*.pack"))
	for _, p := range packs {
		_ = os.WriteFile(p, []byte("PACK broken"), 0o644)
	}
	r, err := m.Sync(ctx, url)
	if err != nil || r.Head != head {
		t.Fatalf("sync of a damaged mirror = %+v, %v", r, err)
	}
	repo, err := m.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CommitObject(plumbing.NewHash(head)); err != nil {
		t.Fatalf("rebuilt mirror lacks the head commit: %v", err)
	}
}

// A sync names the refs it left; a mirror holding them needs no fetch, and
// one that does not (another worker's, or an older state) is told apart.
func TestHoldsTheRefsASyncSaw(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, fg, "acme", "app", "a.txt")
	url := fg.CloneURL("acme", "app")
	first, err := m.Sync(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Holds(first.URL, first.RefsDigest) {
		t.Fatal("the mirror does not hold the refs its own sync saw")
	}
	elsewhere, _ := New(t.TempDir(), nil)
	if elsewhere.Holds(first.URL, first.RefsDigest) {
		t.Fatal("an empty mirror root claims to hold the refs")
	}
	// A synthetic ref of gitfleet's own does not change what the mirror holds.
	if ok, err := m.FetchCommit(ctx, url, first.Head, "refs/gitfleet/scan-targets/commits/"+first.Head); err != nil || !ok {
		t.Fatalf("fetch the head by SHA: %v, %v", ok, err)
	}
	if !m.Holds(first.URL, first.RefsDigest) {
		t.Fatal("a synthetic ref changed the refs digest")
	}
	mustCommit(t, fg, "acme", "app", "b.txt")
	second, err := m.Sync(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if second.RefsDigest == first.RefsDigest || m.Holds(first.URL, first.RefsDigest) || !m.Holds(second.URL, second.RefsDigest) {
		t.Fatalf("digests after a new commit: %s then %s", first.RefsDigest, second.RefsDigest)
	}
	if ok, err := m.FetchCommit(ctx, url, strings.Repeat("ab", 20), "refs/gitfleet/x"); err != nil || ok {
		t.Fatalf("fetch of an unknown commit = %v, %v; want a plain no", ok, err)
	}
}

func TestPathIsDeterministic(t *testing.T) {
	m := &Mirrors{root: "/m"}
	a := m.Path("https://GitHub.com/Acme/App.git")
	if a != m.Path("https://github.com/acme/app") || a == m.Path("https://github.com/acme/app2") {
		t.Fatal("mirror paths do not follow the canonical URL")
	}
	if filepath.Dir(a) != "/m" {
		t.Fatalf("mirror path %s escapes the root", a)
	}
}

// A mirror whose refs a crash left broken (an empty ref file, junk in
// packed-refs: go-git refuses the whole repository) is rebuilt by the next
// sync, and one found damaged by a reader is discarded and fetched anew.
func TestBrokenRefsAndDiscard(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "refs"); err != nil {
		t.Fatal(err)
	}
	head := mustCommit(t, fg, "acme", "refs", "a.txt")
	url := fg.CloneURL("acme", "refs")
	for _, damage := range []struct{ file, content string }{
		{"refs/heads/main", ""},
		{"packed-refs", "junk\n"},
	} {
		if _, err := m.Sync(ctx, url); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.Path(url), filepath.FromSlash(damage.file)), []byte(damage.content), 0o644); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, fg, "acme", "refs", damage.file+".txt") // so that the sync must update refs
		r, err := m.Sync(ctx, url)
		if err != nil {
			t.Fatalf("sync of a mirror with a broken %s: %v (%+v)", damage.file, err, errclass.Classify(err))
		}
		if r.Head == head {
			t.Fatalf("sync of a mirror with a broken %s: head not updated", damage.file)
		}
		head = r.Head
	}
	if err := m.Discard(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Path(url)); !os.IsNotExist(err) {
		t.Fatalf("discarded mirror still there: %v", err)
	}
	if r, err := m.Sync(ctx, url); err != nil || r.Head != head {
		t.Fatalf("sync after discard = %+v, %v", r, err)
	}
}
