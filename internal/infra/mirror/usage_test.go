package mirror

import (
	"context"
	"os"
	"testing"
	"time"
)

// The quota evicts the mirrors least recently used first, down to the
// quota, sparing those used in the last minutes; an evicted mirror is
// fetched again by the next sync.
func TestEvictLeastRecentlyUsed(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	var urls []string
	for _, name := range []string{"old", "middle", "new"} {
		if _, err := fg.CreateRepo("acme", name); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, fg, "acme", name, name+".txt")
		urls = append(urls, fg.CloneURL("acme", name))
		if _, err := m.Sync(ctx, urls[len(urls)-1]); err != nil {
			t.Fatal(err)
		}
	}
	// Last used an hour, two hours and three hours ago: new, middle, old.
	for i, u := range urls {
		at := time.Now().Add(-time.Duration(3-i) * time.Hour)
		if err := os.Chtimes(m.Path(u)+useSuffix, at, at); err != nil {
			t.Fatal(err)
		}
	}
	n, total, err := m.Usage()
	if err != nil || n != 3 || total == 0 {
		t.Fatalf("usage = %d mirrors, %d bytes, %v", n, total, err)
	}
	held, _ := m.Held()
	per := total / 3
	// Room for a little over two: the oldest goes.
	removed, err := m.Evict(ctx, total-per/2)
	if err != nil || len(removed) != 1 || removed[0] != m.Path(urls[0]) {
		t.Fatalf("evicted %v, %v; want the oldest only (held %+v)", removed, err, held)
	}
	if _, err := os.Stat(m.Path(urls[0])); !os.IsNotExist(err) {
		t.Fatalf("the evicted mirror is still there: %v", err)
	}
	// A mirror just used is spared whatever the quota.
	if _, err := m.Sync(ctx, urls[1]); err != nil {
		t.Fatal(err)
	}
	if removed, err = m.Evict(ctx, 0); err != nil || len(removed) != 1 || removed[0] != m.Path(urls[2]) {
		t.Fatalf("evicted %v, %v; want the one not used for an hour, not the one just synced", removed, err)
	}
	// Evicted, fetched again when next needed.
	if r, err := m.Sync(ctx, urls[0]); err != nil || r.Head == "" {
		t.Fatalf("sync after eviction = %+v, %v", r, err)
	}
}
