package mirror

import (
	"context"
	"testing"
)

// A mirror that holds the refs a sync saw answers whether a commit is
// still reachable there; one that holds other refs (or none) says it
// cannot tell.
func TestReaches(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, fg, "acme", "app", "a.txt")
	c2 := mustCommit(t, fg, "acme", "app", "b.txt")
	url := fg.CloneURL("acme", "app")
	if held, _, err := m.Reaches(ctx, url, "digest", c1); held || err != nil {
		t.Fatalf("no mirror yet: held=%t, %v", held, err)
	}
	r, err := m.Sync(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, sha := range []string{c1, c2} {
		if held, ok, err := m.Reaches(ctx, url, r.RefsDigest, sha); !held || !ok || err != nil {
			t.Fatalf("Reaches(%s) = %t, %t, %v; want held and reachable", sha, held, ok, err)
		}
	}
	if held, _, err := m.Reaches(ctx, url, "another sync's refs", c1); held || err != nil {
		t.Fatalf("other refs: held=%t, %v; want not held", held, err)
	}
	if _, _, err := m.Reaches(ctx, url, r.RefsDigest, "nope"); err == nil {
		t.Fatal("a malformed commit id was accepted")
	}

	// A force push leaves c1 and c2 in the mirror's objects, unreachable.
	c3, err := fg.ForcePush("acme", "app", "main", map[string]string{"c.txt": "new history\n"}, "rewrite")
	if err != nil {
		t.Fatal(err)
	}
	if r, err = m.Sync(ctx, url); err != nil {
		t.Fatal(err)
	}
	for sha, want := range map[string]bool{c1: false, c2: false, c3: true} {
		if held, ok, err := m.Reaches(ctx, url, r.RefsDigest, sha); !held || ok != want || err != nil {
			t.Fatalf("after the force push Reaches(%s) = %t, %t, %v; want held, reachable %t", sha, held, ok, err, want)
		}
	}
}

// A mirror holds the commits its syncs fetched, and nothing before its
// first sync or from another repository.
func TestHoldsCommit(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	for _, n := range []string{"held", "other"} {
		if _, err := fg.CreateRepo("acme", n); err != nil {
			t.Fatal(err)
		}
	}
	c1 := mustCommit(t, fg, "acme", "held", "a.txt")
	other := mustCommit(t, fg, "acme", "other", "b.txt")
	url := fg.CloneURL("acme", "held")
	if m.HoldsCommit(url, c1) {
		t.Fatal("no mirror yet, and it holds the commit")
	}
	if _, err := m.Sync(ctx, url); err != nil {
		t.Fatal(err)
	}
	for sha, want := range map[string]bool{c1: true, other: false, "nope": false} {
		if got := m.HoldsCommit(url, sha); got != want {
			t.Errorf("HoldsCommit(%s) = %t, want %t", sha, got, want)
		}
	}
}
