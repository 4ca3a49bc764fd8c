package mirror

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
)

// allocated returns the bytes f allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// tempPacks lists the temporary pack files left in the mirror of url.
func tempPacks(t *testing.T, m *Mirrors, url string) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(m.Path(url), "objects", "pack", "tmp_*"))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// Delta bombs served by a remote, through the real fetch (go-git's
// transport, the mirror's pack writer, gitread's indexer): each bomb's
// entries are refused alone, with bounded memory, and the rest of the pack
// is kept (issue 31: before, the whole Sync was refused, Permanent, and
// nothing of the repository could be read). The pack stays as received
// (its checksum holds), its index lists the rest, and the refusals file
// beside it tells the bomb refused with its limit, not missing; the next
// Sync has nothing to fetch, and a repack keeps the refusals.
func TestSyncRefusesOnlyTheBombs(t *testing.T) {
	for _, tt := range []struct {
		crafted *gittest.Crafted
		what    string
	}{
		{gittest.NestedDeltas(1<<30, 64<<30), "object size"},
		{gittest.HugeDeclaredSize(), "object size"},
		{gittest.DeltaCycle(), "delta chain"},
	} {
		t.Run(tt.crafted.Name, func(t *testing.T) {
			srv := &gittest.PackServer{Pack: tt.crafted.Bytes(), Commit: tt.crafted.Commit}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			m, err := New(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			url := ts.URL + "/evil/bomb.git"
			n := allocated(func() { _, err = m.Sync(context.Background(), url) })
			t.Logf("%v (%d KiB allocated, %d requests)", err, n>>10, srv.Requests.Load())
			if err != nil {
				t.Fatalf("Sync: %v, want the bomb refused alone", err)
			}
			if n > 64<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
			if left := tempPacks(t, m, url); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			path := m.Path(url)
			checkRefused(t, path, tt.crafted, tt.what)

			requests := srv.Requests.Load()
			if _, err := m.Sync(context.Background(), url); err != nil {
				t.Fatalf("second Sync: %v", err)
			}
			// The mirror has the commit: the refs are asked for (twice:
			// the advertisement, go-git's fetch), no pack.
			if got := srv.Requests.Load() - requests; got >= requests {
				t.Errorf("second Sync: %d requests, the first %d: want no pack fetched", got, requests)
			}

			// A repack merges the pack with another one: the bomb is
			// refused again, its refusals follow it.
			extra := gittest.NewPack()
			extra.Blob([]byte("another pack\n"))
			if err := extra.WriteFiles(path, "0000000000000000000000000000000000000001", false); err != nil {
				t.Fatal(err)
			}
			packs, err := listPacks(path)
			if err != nil || len(packs) != 2 {
				t.Fatalf("packs %v, %v", packs, err)
			}
			if err := mergePacks(context.Background(), filepath.Join(path, "objects", "pack"), packs); err != nil {
				t.Fatalf("repack: %v", err)
			}
			if packs, _ := listPacks(path); len(packs) != 1 {
				t.Fatalf("packs after the repack: %v", packs)
			}
			if left, _ := filepath.Glob(filepath.Join(path, "objects", "pack", "*.refused")); len(left) != 1 {
				t.Errorf("refusals files after the repack: %v, want the merged pack's", left)
			}
			checkRefused(t, path, tt.crafted, tt.what)
		})
	}
}

// checkRefused checks the mirror at path: its packs open, the commit
// reads, and the blob its tree names is refused over the bound what.
func checkRefused(t *testing.T, path string, c *gittest.Crafted, what string) {
	t.Helper()
	ps, err := gitread.OpenPacks(path)
	if err != nil {
		t.Fatalf("open the packs: %v", err)
	}
	defer ps.Close()
	r := ps.NewReader()
	if _, _, err := r.ReadObject(c.Commit, nil); err != nil {
		t.Fatalf("the commit: %v", err)
	}
	_, tree, err := r.ReadObject(c.Commit, nil)
	if err != nil {
		t.Fatal(err)
	}
	th := plumbing.NewHash(strings.TrimPrefix(strings.SplitN(string(tree), "\n", 2)[0], "tree "))
	_, raw, err := r.ReadObject(th, nil)
	if err != nil {
		t.Fatalf("the tree: %v", err)
	}
	var top plumbing.Hash
	copy(top[:], raw[len(raw)-20:])
	if _, _, err := r.ObjectSize(top); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Fatalf("the bomb's top: %v, want not indexed", err)
	}
	var limit *gitread.LimitError
	if err := ps.Refused(top); !errors.As(err, &limit) || limit.What != what {
		t.Fatalf("Refused(top) = %v, want over the %s", err, what)
	}
}

// A pack over GITFLEET_MAX_PACK_BYTES stops the fetch as it arrives:
// Permanent, and nothing of it stays on the disk.
func TestSyncPackSizeLimit(t *testing.T) {
	fg, m := setup(t)
	if _, err := fg.CreateRepo("acme", "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit("acme", "big", "main", map[string]string{"data.bin": string(noise(1 << 20))}, "big"); err != nil {
		t.Fatal(err)
	}
	old := gitread.CurrentLimits()
	gitread.SetLimits(gitread.Limits{MaxPackBytes: 256 << 10})
	defer gitread.SetLimits(old)
	url := fg.CloneURL("acme", "big")
	_, err := m.Sync(context.Background(), url)
	if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent || c.Reason != errclass.ReasonLimit+": pack size" {
		t.Fatalf("Sync: %v (%+v), want Permanent, over the pack size", err, c)
	}
	if left := tempPacks(t, m, url); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// noise is n bytes that do not compress.
func noise(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// Partial packs a crashed fetch left in a mirror are removed by the next
// sync, which holds the mirror's lock.
func TestSyncRemovesPartialPacks(t *testing.T) {
	fg, m := setup(t)
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, fg, "acme", "app", "a.txt")
	url := fg.CloneURL("acme", "app")
	if _, err := m.Sync(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tmp_pack_123456", "tmp_idx_987"} {
		if err := os.WriteFile(filepath.Join(m.Path(url), "objects", "pack", name), make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustCommit(t, fg, "acme", "app", "b.txt")
	if _, err := m.Sync(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	if left := tempPacks(t, m, url); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// Scratch repositories a dead process left under the root's tmp/ (a fetch
// by SHA, a mirror being created) are removed once a day old, when a
// Mirrors opens the root; younger ones may be another process's.
func TestNewRemovesStaleScratch(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	for _, d := range []string{"verify-old", "init-old", "verify-new"} {
		if err := os.MkdirAll(filepath.Join(tmp, d, "objects", "pack"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-25 * time.Hour)
	for _, d := range []string{"verify-old", "init-old"} {
		if err := os.Chtimes(filepath.Join(tmp, d), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(root, nil); err != nil {
		t.Fatal(err)
	}
	left, err := os.ReadDir(tmp)
	if err != nil || len(left) != 1 || left[0].Name() != "verify-new" {
		t.Fatalf("left %v, %v; want verify-new only", left, err)
	}
}

// counting counts the requests a server gets.
type counting struct {
	n atomic.Int64
	h http.Handler
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

// redirectTo redirects every request to target's origin, same path.
func redirectTo(target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.RequestURI(), http.StatusFound)
	})
}

// A remote's redirects are followed within its origin only: another host,
// or https to http on the same one, is refused before anything is sent
// there, by the probe and by go-git's own requests alike (a remote that
// answers the probe and redirects the fetch); within the origin (a
// renamed repository) they are followed, as TestResolveFollowsRenames
// checks.
func TestRedirectsStayOnTheHost(t *testing.T) {
	c := gittest.DeepTree(1)
	elsewhere := &counting{h: &gittest.PackServer{Pack: c.Bytes(), Commit: c.Commit}}
	other := httptest.NewServer(elsewhere)
	defer other.Close()
	// The same host name as the TLS server below (127.0.0.1), plain http.
	plain := httptest.NewServer(elsewhere)
	defer plain.Close()

	cross := httptest.NewServer(redirectTo(other.URL))
	defer cross.Close()
	downgrade := httptest.NewTLSServer(redirectTo(plain.URL))
	defer downgrade.Close()
	// Answers the probe, then redirects go-git's own request for the refs.
	var probes atomic.Int64
	serve := &gittest.PackServer{Pack: c.Bytes(), Commit: c.Commit}
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") && probes.Add(1) > 1 {
			redirectTo(other.URL).ServeHTTP(w, r)
			return
		}
		serve.ServeHTTP(w, r)
	}))
	defer late.Close()

	for name, tt := range map[string]struct {
		url    string
		client *http.Client
	}{
		"another host":  {cross.URL + "/acme/app.git", nil},
		"https to http": {downgrade.URL + "/acme/app.git", downgrade.Client()},
		"the fetch's":   {late.URL + "/acme/app.git", nil},
	} {
		t.Run(name, func(t *testing.T) {
			before := elsewhere.n.Load()
			m, err := New(t.TempDir(), tt.client)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Sync(context.Background(), tt.url)
			if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent {
				t.Fatalf("Sync: %v (%+v), want Permanent", err, c)
			}
			if _, err := m.Resolve(context.Background(), tt.url); err == nil && name != "the fetch's" {
				t.Error("Resolve followed the redirect")
			}
			if n := elsewhere.n.Load() - before; n != 0 {
				t.Errorf("the other origin got %d requests", n)
			}
			t.Log(err)
		})
	}
}

// A reference advertisement is read up to maxAdvertisement bytes, by the
// probe and by go-git: an endless one is refused, Permanent, with bounded
// memory.
func TestAdvertisementIsBounded(t *testing.T) {
	old := maxAdvertisement
	maxAdvertisement = 1 << 20
	defer func() { maxAdvertisement = old }()
	c := gittest.DeepTree(1)
	serve := &gittest.PackServer{Pack: c.Bytes(), Commit: c.Commit}
	endless := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		io.WriteString(w, gittest.PktLine("# service=git-upload-pack\n")+"0000")
		io.WriteString(w, gittest.PktLine(c.Commit.String()+" HEAD\x00agent=x\n"))
		line := gittest.PktLine(c.Commit.String() + " refs/heads/" + strings.Repeat("b", 200) + "\n")
		for {
			if _, err := io.WriteString(w, line); err != nil {
				return // the client hung up
			}
		}
	}
	var probes atomic.Int64
	for name, h := range map[string]http.HandlerFunc{
		"probe": endless,
		"go-git": func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/info/refs") && probes.Add(1) > 1 {
				endless(w, r)
				return
			}
			serve.ServeHTTP(w, r)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(h)
			defer ts.Close()
			m, err := New(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			n := allocated(func() { _, err = m.Sync(context.Background(), ts.URL+"/acme/app.git") })
			c := errclass.Classify(err)
			t.Logf("%v (%d KiB allocated)", err, n>>10)
			if !errors.Is(err, gitread.ErrLimit) || c.Class != errclass.Permanent || c.Reason != errclass.ReasonLimit+": refs size" {
				t.Fatalf("Sync: %v (%+v), want Permanent, over the refs size", err, c)
			}
			if n > 64<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
		})
	}
}
