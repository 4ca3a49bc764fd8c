package mirror

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"gitfleet/internal/devstack/forge"
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
	removed, err := m.Evict(ctx, total-per/2, nil)
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
	if removed, err = m.Evict(ctx, 0, nil); err != nil || len(removed) != 1 || removed[0] != m.Path(urls[2]) {
		t.Fatalf("evicted %v, %v; want the one not used for an hour, not the one just synced", removed, err)
	}
	// Evicted, fetched again when next needed.
	if r, err := m.Sync(ctx, urls[0]); err != nil || r.Head == "" {
		t.Fatalf("sync after eviction = %+v, %v", r, err)
	}
}

// synced syncs n repositories of a new forge into m, each last used two
// hours ago, and returns their URLs.
func synced(t *testing.T, n int) (*forge.Forge, *Mirrors, []string) {
	t.Helper()
	fg, m := setup(t)
	var urls []string
	for i := range n {
		name := fmt.Sprintf("repo-%d", i)
		if _, err := fg.CreateRepo("acme", name); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, fg, "acme", name, name+".txt")
		u := fg.CloneURL("acme", name)
		if _, err := m.Sync(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		age(t, m.Path(u), 2*time.Hour)
		urls = append(urls, u)
	}
	return fg, m, urls
}

// age makes the mirror at path last used d ago.
func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(path+useSuffix, at, at); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A mirror whose lock is held — a sync fetching into it, in this process
// or another — is skipped, not waited for: the quota never waits behind a
// fetch, and never removes what that fetch is writing. Failed before: Evict
// waited for the lock (until its context ended), then removed the mirror.
func TestEvictSkipsABusyMirror(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(t *testing.T, m *Mirrors, path string) (release func())
	}{
		{"a sync of this process", func(t *testing.T, m *Mirrors, path string) func() {
			unlock, err := m.lock(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			return unlock
		}},
		{"another process", func(t *testing.T, _ *Mirrors, path string) func() {
			fl := flock.New(path + ".lock")
			if err := fl.Lock(); err != nil {
				t.Fatal(err)
			}
			return func() { fl.Close() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m, urls := synced(t, 2)
			busy, idle := m.Path(urls[0]), m.Path(urls[1])
			release := tc.hold(t, m, busy)
			// Bounded only so that a regression fails rather than hangs.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			removed, err := m.Evict(ctx, 0, nil)
			if err != nil || !slices.Equal(removed, []string{idle}) {
				t.Fatalf("evicted %v, %v; want only the idle mirror %s", removed, err, idle)
			}
			if !exists(busy) {
				t.Fatal("the busy mirror was removed")
			}
			release()
			if removed, err = m.Evict(ctx, 0, nil); err != nil || !slices.Equal(removed, []string{busy}) {
				t.Fatalf("once idle: evicted %v, %v; want %s", removed, err, busy)
			}
		})
	}
}

// A sync that ends between Evict's listing and its removal keeps its
// mirror: Evict looks at the last use again under the lock. (With that
// check removed, this test fails: the mirror just synced is removed.)
func TestEvictKeepsAMirrorSyncedMeanwhile(t *testing.T) {
	_, m, urls := synced(t, 1)
	path := m.Path(urls[0])
	testHookEvictListed = func() {
		if _, err := m.Sync(context.Background(), urls[0]); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { testHookEvictListed = nil })
	removed, err := m.Evict(context.Background(), 0, nil)
	if err != nil || len(removed) != 0 || !exists(path) {
		t.Fatalf("evicted %v, %v; the mirror synced meanwhile must stay", removed, err)
	}
}

// Usage reads each mirror's sidecar, written under its lock by each sync,
// rather than walking its files; a mirror of an earlier release (no
// sidecar) is walked once and gets one. Failed before: Usage walked every
// file (so counted a file no sync wrote).
func TestUsageFromSidecars(t *testing.T) {
	fg, m, urls := synced(t, 2)
	ctx := context.Background()
	n, total, err := m.Usage()
	want := dirBytes(m.Path(urls[0])) + dirBytes(m.Path(urls[1]))
	if err != nil || n != 2 || total != want {
		t.Fatalf("usage = %d mirrors, %d bytes, %v; want 2, %d", n, total, err, want)
	}
	// A file no sync wrote is not walked...
	extra := filepath.Join(m.Path(urls[0]), "objects", "extra")
	if err := os.WriteFile(extra, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := m.Usage(); got != want {
		t.Fatalf("usage = %d bytes after a file was added outside a sync; want the sidecars' %d", got, want)
	}
	// ...the next sync records it (and what it fetched).
	mustCommit(t, fg, "acme", "repo-0", "more.txt")
	if _, err := m.Sync(ctx, urls[0]); err != nil {
		t.Fatal(err)
	}
	want = dirBytes(m.Path(urls[0])) + dirBytes(m.Path(urls[1]))
	if _, got, _ := m.Usage(); got != want || got <= total+4096 {
		t.Fatalf("usage = %d after the sync; want %d (more than %d)", got, want, total+4096)
	}
	// A mirror without a sidecar is walked once, and gets one.
	if err := os.Remove(m.Path(urls[1]) + metaSuffix); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := m.Usage(); got != want {
		t.Fatalf("usage = %d without a sidecar; want %d", got, want)
	}
	if sc, ok := readSidecar(m.Path(urls[1])); !ok || sc.Bytes != dirBytes(m.Path(urls[1])) {
		t.Fatalf("sidecar after the walk = %+v, %v", sc, ok)
	}
	// The sidecar names the URL synced from, never its credentials.
	if sc, _ := readSidecar(m.Path(urls[0])); sc.URL != urls[0] {
		t.Fatalf("sidecar URL = %q, want %q", sc.URL, urls[0])
	}
	if got := withoutUserinfo("https://user:secret@example.com/a/b.git"); strings.Contains(got, "secret") || got != "https://example.com/a/b.git" {
		t.Fatalf("withoutUserinfo = %q", got)
	}
}

// Over the quota, the mirrors this worker does not own (their repositories
// moved to another worker) go first, even used more recently than its own.
// Failed before: eviction ignored ownership and removed the worker's own
// repositories while keeping copies it no longer owned.
func TestEvictNotOwnedFirst(t *testing.T) {
	_, m, urls := synced(t, 3)
	// Its own: used 3 and 2 hours ago; another's: used 30 minutes ago.
	age(t, m.Path(urls[0]), 3*time.Hour)
	age(t, m.Path(urls[2]), 30*time.Minute)
	owned := func(u string) bool { return u != urls[2] }
	_, total, _ := m.Usage()
	one := dirBytes(m.Path(urls[2]))
	removed, err := m.Evict(context.Background(), total-one, owned)
	if err != nil || !slices.Equal(removed, []string{m.Path(urls[2])}) {
		t.Fatalf("evicted %v, %v; want the mirror not owned, %s", removed, err, m.Path(urls[2]))
	}
	// Then its own, least recently used first.
	removed, err = m.Evict(context.Background(), 1, owned)
	if err != nil || !slices.Equal(removed, []string{m.Path(urls[0]), m.Path(urls[1])}) {
		t.Fatalf("evicted %v, %v; want its own, oldest first", removed, err)
	}
}

// Mirrors of repositories another worker owns are removed once this worker
// has not owned them for the grace period, as its upkeep sees it; one owned
// again meanwhile starts over, and one busy, used in the last 10 minutes,
// or of unknown URL stays. Failed before: nothing removed a mirror this
// worker no longer owned (without a quota, kept forever).
func TestReleaseUnowned(t *testing.T) {
	_, m, urls := synced(t, 6)
	mine, gone, recent, back, unknown, busy := urls[0], urls[1], urls[2], urls[3], urls[4], urls[5]
	age(t, m.Path(recent), 5*time.Minute)
	sc, _ := readSidecar(m.Path(unknown))
	sc.URL = ""
	m.writeSidecar(m.Path(unknown), sc)
	unlock, err := m.lock(context.Background(), m.Path(busy))
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	ownedAt := map[time.Duration]func(string) bool{
		0:                func(u string) bool { return u == mine },
		30 * time.Minute: func(u string) bool { return u == mine || u == back },
		61 * time.Minute: func(u string) bool { return u == mine },
		62 * time.Minute: func(u string) bool { return u == mine },
	}
	for _, step := range []struct {
		at   time.Duration
		want []string
	}{
		{0, nil},
		{30 * time.Minute, nil},
		{61 * time.Minute, []string{m.Path(gone)}}, // back was owned at 30m: its hour starts at 61m
		{62 * time.Minute, nil},
	} {
		removed, err := m.ReleaseUnowned(context.Background(), ownedAt[step.at], time.Hour, t0.Add(step.at))
		if err != nil || !slices.Equal(removed, step.want) {
			t.Fatalf("at %v: removed %v, %v; want %v", step.at, removed, err, step.want)
		}
	}
	for _, u := range []string{mine, recent, back, unknown, busy} {
		if !exists(m.Path(u)) {
			t.Errorf("%s removed", u)
		}
	}
	// Not owned since 61m, back goes at 2h01; busy once its lock is free.
	unlock()
	removed, err := m.ReleaseUnowned(context.Background(), ownedAt[0], time.Hour, t0.Add(121*time.Minute))
	if want := []string{m.Path(back), m.Path(busy)}; err != nil || !slices.Equal(sorted(removed), sorted(want)) {
		t.Fatalf("at 2h01: removed %v, %v; want %v", removed, err, want)
	}
	// Without knowing who owns what, nothing is taken for another's.
	if removed, err := m.ReleaseUnowned(context.Background(), nil, 0, t0.Add(5*time.Hour)); err != nil || len(removed) != 0 {
		t.Fatalf("ownership unknown: removed %v, %v", removed, err)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
