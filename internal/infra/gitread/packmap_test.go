package gitread

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// Packs mapped in memory read the same as packs read with ReadAt, also
// while other readers drop the mapped pages under them (run with -race).
func TestPackReaderMappedPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	spec := packSpec
	spec.Commits = 100
	packedRepo(t, dir, spec)
	blobs := blobsOf(listObjects(t, dir))
	want := expectedBlobs(t, dir, blobs)

	mapped := openPacks(t, dir)
	if runtime.GOOS == "linux" && strconv.IntSize == 64 && mapped.packs[0].data == nil {
		t.Fatal("the pack is not mapped")
	}
	read := openPacks(t, dir)
	for _, p := range read.packs {
		p.data = nil // read with ReadAt
	}
	t.Run("ReadAt", func(t *testing.T) { checkAll(t, read.NewReader(), blobs, want) })
	// No budget: the pages are dropped again and again.
	mapped.pages.max = 0
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := append([]objInfo(nil), blobs...)
			rand.New(rand.NewPCG(uint64(g), 3)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			r := mapped.NewReader()
			r.cache.init(0, deltaBaseCacheSlots) // every read reads the pack
			var buf []byte
			for pass := 0; pass < 3; pass++ {
				for _, o := range order {
					data, _, err := r.Read(o.h, 0, buf)
					if err != nil || !bytes.Equal(data, want[o.h]) {
						t.Errorf("goroutine %d: Read %s: %v", g, o.h, err)
						return
					}
					buf = data
				}
			}
		}()
	}
	wg.Wait()
	mapped.pages.mu.Lock()
	drops := mapped.pages.drops
	mapped.pages.mu.Unlock()
	if drops < 10 {
		t.Errorf("pages dropped %d times", drops)
	}
	t.Logf("%d drops", drops)
}

// A Walker that is Done hands its pack reader, with the trees it cached,
// to the next NewReader, and goes on through go-git.
func TestWalkerDoneHandsOverItsReader(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	spec := packSpec
	spec.Commits = 50
	packedRepo(t, dir, spec)
	repo, closer, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ps := openPacks(t, dir)
	w := New(repo, Options{Packs: ps})
	want, _ := walkAll(t, repo, Options{Packs: ps}, allRefs(t, repo)...)
	if _, err := w.Walk(t.Context(), allRefs(t, repo), func(Blob) error { return nil }); err != nil {
		t.Fatal(err)
	}
	pr := w.pr
	w.Done()
	if r := ps.NewReader(); r != pr || r.targetsOnly || r.cache.used == 0 {
		t.Errorf("NewReader after Done: %p (targetsOnly %t, %d bytes cached), want the walker's %p", r, r.targetsOnly, r.cache.used, pr)
	}
	if r := ps.NewReader(); r == pr {
		t.Error("the walker's reader handed over twice")
	}
	var got []Blob
	if _, err := w.Walk(t.Context(), allRefs(t, repo), func(b Blob) error { got = append(got, b); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("walk after Done: %d blobs, want %d", len(got), len(want))
	}
}
