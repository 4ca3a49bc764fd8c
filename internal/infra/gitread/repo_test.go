package gitread

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/repogen"
)

var smallSpec = repogen.Spec{
	Commits:        200,
	FilesPerCommit: 4,
	Refs:           30,
	BlobSize:       400,
	Binary:         5,
	Seed:           1,
	Secrets:        []repogen.Secret{{Commit: 120, Path: "deploy/secrets.yaml", Content: "db_password: hunter2hunter2\n"}},
}

func smallRepo(t *testing.T) (string, repogen.Info) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small.git")
	info, err := repogen.Generate(dir, smallSpec)
	if err != nil {
		t.Fatal(err)
	}
	return dir, info
}

// The same walk gives the same blobs in the same order, on a fresh Walker
// and a freshly opened repository.
func TestDeterministicOrder(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(repoModeName(packs), func(t *testing.T) { testDeterministicOrder(t, packs) })
	}
}

func testDeterministicOrder(t *testing.T, packs bool) {
	dir, info := smallRepo(t)
	var runs [][]string
	for i := 0; i < 3; i++ {
		repo, opts, closer := openRepo(t, dir, packs)
		blobs, st := walkAll(t, repo, opts, allRefs(t, repo)...)
		closer()
		if st.Blobs != info.Blobs || st.Commits != smallSpec.Commits {
			t.Fatalf("stats %+v, want %d blobs", st, info.Blobs)
		}
		var seq []string
		for _, b := range blobs {
			seq = append(seq, fmt.Sprint(b.Hash, b.Path, b.Commit, b.Ref))
		}
		runs = append(runs, seq)
	}
	if !slices.Equal(runs[0], runs[1]) || !slices.Equal(runs[0], runs[2]) {
		t.Error("order differs between runs")
	}
}

// Incremental scans: each ref's previous tip is its stop, and the caller's
// seen-set carries over. The union of the scans is the full scan.
func TestIncrementalScans(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(repoModeName(packs), func(t *testing.T) { testIncrementalScans(t, packs) })
	}
}

func testIncrementalScans(t *testing.T, packs bool) {
	dir, info := smallRepo(t)
	repo, opts, closer := openRepo(t, dir, packs)
	defer closer()
	seen := map[plumbing.Hash]bool{}
	opts.Seen = func(h plumbing.Hash) bool { return seen[h] }
	record := func(blobs []Blob) {
		for _, b := range blobs {
			if seen[b.Hash] {
				t.Errorf("blob %s reported again", b.Hash)
			}
			seen[b.Hash] = true
		}
	}
	h := func(i int) plumbing.Hash { return plumbing.NewHash(info.Commits[i]) }
	// Scan 1: main at commit 99. Scan 2: main at 149, a new branch at 120.
	// Scan 3: main at its tip, branch unchanged.
	b1, s1 := walkAll(t, repo, opts, Range{Ref: "main", Tip: h(99)})
	record(b1)
	b2, s2 := walkAll(t, repo, opts,
		Range{Ref: "main", Tip: h(149), Stops: []plumbing.Hash{h(99)}},
		Range{Ref: "feature", Tip: h(120), Stops: []plumbing.Hash{h(99)}})
	record(b2)
	b3, s3 := walkAll(t, repo, opts,
		Range{Ref: "main", Tip: h(199), Stops: []plumbing.Hash{h(149)}},
		Range{Ref: "feature", Tip: h(120), Stops: []plumbing.Hash{h(120)}})
	record(b3)
	if s1.Commits != 100 || s2.Commits != 50 || s2.SharedCommits != 21 || s2.EmptyRanges != 1 || s3.Commits != 50 || s3.EmptyRanges != 1 {
		t.Errorf("commits: %+v / %+v / %+v", s1, s2, s3)
	}
	if len(seen) != info.Blobs {
		t.Errorf("scans found %d blobs, the repository has %d", len(seen), info.Blobs)
	}
}

// Blobs can be read and scanned by worker goroutines while the walk goes on
// (run with -race).
func TestConcurrentReads(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(repoModeName(packs), func(t *testing.T) { testConcurrentReads(t, packs) })
	}
}

func testConcurrentReads(t *testing.T, packs bool) {
	dir, info := smallRepo(t)
	repo, opts, closer := openRepo(t, dir, packs)
	defer closer()
	w := New(repo, opts)
	work := make(chan Blob)
	var mu sync.Mutex
	var total int64
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				data, size, err := w.ReadBlob(b.Hash, 1<<20)
				if err != nil || size != b.Size || int64(len(data)) != size {
					t.Errorf("ReadBlob %s: %v", b.Hash, err)
				}
				mu.Lock()
				total += size
				mu.Unlock()
			}
		}()
	}
	st, err := w.Walk(context.Background(), allRefs(t, repo), func(b Blob) error {
		work <- b
		return nil
	})
	close(work)
	wg.Wait()
	if err != nil || total != info.BlobBytes || st.BlobBytes != info.BlobBytes {
		t.Errorf("err %v, read %d bytes, walk %d, repository %d", err, total, st.BlobBytes, info.BlobBytes)
	}
}
