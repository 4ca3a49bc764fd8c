package mirror

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// packedObjects lists the objects of the mirror's packs, from their
// indexes.
func packedObjects(t *testing.T, path string) []plumbing.Hash {
	t.Helper()
	idxs, _ := filepath.Glob(filepath.Join(path, "objects", "pack", "pack-*.idx"))
	var out []plumbing.Hash
	for _, p := range idxs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		ix := idxfile.NewMemoryIndex()
		if err := idxfile.NewDecoder(f).Decode(ix); err != nil {
			t.Fatal(err)
		}
		f.Close()
		it, err := ix.Entries()
		if err != nil {
			t.Fatal(err)
		}
		for {
			e, err := it.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Hash)
		}
	}
	slices.SortFunc(out, func(a, b plumbing.Hash) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// A mirror past the pack limit is repacked into one pack holding every
// object it held, each readable and intact, and syncs on from it; a mirror
// busy or used in the last 10 minutes waits. Failed before: nothing merged
// packs (a pack and an index per changed sync, for good).
func TestRepackMergesPacks(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "app")
	path := m.Path(url)
	// Similar files in each push: their packs hold deltas.
	big := strings.Repeat("a line of the file, long enough to be worth a delta\n", 200)
	for i := range 5 {
		files := map[string]string{}
		for j := range 3 {
			files[fmt.Sprintf("big-%d-%d.txt", i, j)] = big + fmt.Sprintf("version %d %d\n", i, j)
		}
		if _, err := fg.Commit("acme", "app", "main", files, "more"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Sync(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	// A commit by SHA, pinned under a ref of gitfleet's own, is kept too.
	pinned, err := fg.ForcePush("acme", "app", "main", map[string]string{"other.txt": "other\n"}, "rewrite")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := m.FetchCommit(ctx, url, pinned, "refs/gitfleet/pinned"); err != nil || !ok {
		t.Fatalf("fetch by SHA = %v, %v", ok, err)
	}
	before := packedObjects(t, path)
	if deltas := countDeltas(t, path); deltas == 0 {
		t.Fatal("no delta in the mirror's packs: the test would not show them merged")
	}
	if n := countPacks(path); n < 6 {
		t.Fatalf("%d packs after 6 fetches", n)
	}
	// Used just now: kept as it is; busy: skipped.
	if done, err := m.Repack(ctx, 2); err != nil || len(done) != 0 {
		t.Fatalf("repacked %v, %v while in use", done, err)
	}
	age(t, path, time.Hour)
	unlock, err := m.lock(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if done, err := m.Repack(ctx, 2); err != nil || len(done) != 0 {
		t.Fatalf("repacked %v, %v while busy", done, err)
	}
	unlock()

	done, err := m.Repack(ctx, 2)
	if err != nil || !slices.Equal(done, []string{path}) {
		t.Fatalf("repacked %v, %v; want %s", done, err, path)
	}
	if n := countPacks(path); n != 1 {
		t.Fatalf("%d packs after the repack, want 1", n)
	}
	if after := packedObjects(t, path); !slices.Equal(after, before) {
		t.Fatalf("objects after the repack: %d, before: %d", len(after), len(before))
	}
	if sc, _ := readSidecar(path); sc.Packs != 1 || sc.Bytes != dirBytes(path) {
		t.Fatalf("sidecar after the repack = %+v", sc)
	}
	// Every object reads back whole: its content hashes to its name.
	repo, err := git.PlainOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range before {
		o, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			t.Fatalf("object %s: %v", h, err)
		}
		r, err := o.Reader()
		if err != nil {
			t.Fatal(err)
		}
		hw := plumbing.NewHasher(o.Type(), o.Size())
		if _, err := io.Copy(hw, r); err != nil {
			t.Fatalf("object %s: %v", h, err)
		}
		r.Close()
		if got := hw.Sum(); got != h {
			t.Fatalf("object %s reads as %s", h, got)
		}
	}
	// Under the limit: left alone.
	if done, err := m.Repack(ctx, 2); err != nil || len(done) != 0 {
		t.Fatalf("repacked %v, %v under the limit", done, err)
	}
	// Syncs go on from the merged pack.
	head := mustCommit(t, fg, "acme", "app", "after.txt")
	if r, err := m.Sync(ctx, url); err != nil || r.Head != head {
		t.Fatalf("sync after the repack = %+v, %v", r, err)
	}
	if !m.HoldsCommit(url, head) || !m.HoldsCommit(url, pinned) {
		t.Fatal("the mirror lost a commit")
	}
}

// countDeltas counts the delta entries of the mirror's packs.
func countDeltas(t *testing.T, path string) int {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(path, "objects", "pack", "pack-*.pack"))
	n := 0
	for _, p := range packs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := packfile.NewScanner(f)
		_, count, err := sc.Header()
		if err != nil {
			t.Fatal(err)
		}
		for range count {
			h, err := sc.NextObjectHeader()
			if err != nil {
				t.Fatal(err)
			}
			if h.Type == plumbing.OFSDeltaObject || h.Type == plumbing.REFDeltaObject {
				n++
			}
			if _, _, err := sc.NextObject(io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	return n
}

// A repack that died after placing the merged pack, before removing the
// packs it merged, leaves every object twice: the next repack merges them
// all again, and each object still reads.
func TestRepackAfterACrash(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "app")
	path := m.Path(url)
	for i := range 3 {
		mustCommit(t, fg, "acme", "app", fmt.Sprintf("f%d.txt", i))
		if _, err := m.Sync(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	before := packedObjects(t, path)
	dir := filepath.Join(path, "objects", "pack")
	saved := t.TempDir()
	olds, _ := filepath.Glob(filepath.Join(dir, "pack-*"))
	for _, p := range olds {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(saved, filepath.Base(p)), b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	age(t, path, time.Hour)
	if done, err := m.Repack(ctx, 2); err != nil || len(done) != 1 {
		t.Fatalf("repacked %v, %v", done, err)
	}
	// The crash: the merged packs are back beside the merged one.
	for _, p := range olds {
		b, _ := os.ReadFile(filepath.Join(saved, filepath.Base(p)))
		if err := os.WriteFile(p, b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	m.record(path, "")
	age(t, path, time.Hour)
	if done, err := m.Repack(ctx, 2); err != nil || len(done) != 1 {
		t.Fatalf("second repack: %v, %v", done, err)
	}
	if n := countPacks(path); n != 1 {
		t.Fatalf("%d packs, want 1", n)
	}
	repo, err := git.PlainOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range before {
		if _, err := repo.Storer.EncodedObject(plumbing.AnyObject, h); err != nil {
			t.Fatalf("object %s: %v", h, err)
		}
	}
}

// A mirror being read (a scan longer than 10 minutes, a build) is neither
// evicted nor repacked, however long ago it was last used; once its reader
// is done it is. Failed before: only the last use (10 minutes) spared it,
// so eviction removed a mirror a long scan was still reading.
func TestReadMirrorIsSpared(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "app")
	path := m.Path(url)
	for i := range 2 {
		mustCommit(t, fg, "acme", "app", fmt.Sprintf("f%d.txt", i))
		if _, err := m.Sync(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	reading, err := m.Reading(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.Reading(ctx, url) // readers share
	if err != nil {
		t.Fatal(err)
	}
	age(t, path, time.Hour)
	if done, err := m.Repack(ctx, 1); err != nil || len(done) != 0 {
		t.Fatalf("repacked %v, %v while read", done, err)
	}
	if removed, err := m.Evict(ctx, 0, nil); err != nil || len(removed) != 0 {
		t.Fatalf("evicted %v, %v while read", removed, err)
	}
	reading.Close()
	if removed, err := m.Evict(ctx, 0, nil); err != nil || len(removed) != 0 {
		t.Fatalf("evicted %v, %v while another reader reads", removed, err)
	}
	other.Close()
	if done, err := m.Repack(ctx, 1); err != nil || len(done) != 1 {
		t.Fatalf("repacked %v, %v once no one reads", done, err)
	}
	age(t, path, time.Hour)
	if removed, err := m.Evict(ctx, 0, nil); err != nil || len(removed) != 1 {
		t.Fatalf("evicted %v, %v once no one reads", removed, err)
	}
}
