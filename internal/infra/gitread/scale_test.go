package gitread

import (
	"context"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/repogen"
)

// TestScale walks a generated repository of 10,000 commits, ~50,000 blobs
// and 1,000 refs: every blob once, every commit diffed once.
func TestScale(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(repoModeName(packs), func(t *testing.T) { testScale(t, packs) })
	}
}

func testScale(t *testing.T, packs bool) {
	dir, info := scaleRepo(t)
	t.Logf("generated in %v: %d commits, %d blobs (%d MB), %d refs", scaleGen.Round(time.Millisecond),
		len(info.Commits), info.Blobs, info.BlobBytes>>20, len(info.Refs))
	repo, opts, closer := openRepo(t, dir, packs)
	defer closer()
	ranges := allRefs(t, repo)
	if len(ranges) != 1000 {
		t.Fatalf("%d refs", len(ranges))
	}

	secret := scaleSpec.Secrets[0]
	found := false
	start := time.Now()
	seen := map[plumbing.Hash]bool{}
	blobs, st := walkAll(t, repo, opts, ranges...)
	t.Logf("walked in %v: %+v", time.Since(start).Round(time.Millisecond), st)
	for _, b := range blobs {
		if seen[b.Hash] {
			t.Fatalf("blob %s reported twice", b.Hash)
		}
		seen[b.Hash] = true
		if b.Path == secret.Path {
			found = true
			if b.Commit.String() != info.Commits[secret.Commit] {
				t.Errorf("secret attributed to %s, planted by %s", b.Commit, info.Commits[secret.Commit])
			}
		}
	}
	if !found {
		t.Error("planted secret not reported")
	}
	if st.Blobs != info.Blobs || st.BlobBytes != info.BlobBytes || st.Commits != 10000 || st.CommitsRead != 10000 ||
		st.SkippedSeen != 0 || st.Ranges != 1000 || st.Commits+st.SharedCommits > 10000+1000 {
		t.Errorf("stats %+v, want %d blobs (%d bytes), 10000 commits each read once", st, info.Blobs, info.BlobBytes)
	}

	// The next scan: main moved on by 500 commits since its watermark, and
	// the caller's seen-set knows every blob of the first scan up to it.
	mark := info.Commits[9499]
	inc, st2 := walkAll(t, repo, opts, Range{Ref: "refs/heads/main", Tip: plumbing.NewHash(info.Head), Stops: []plumbing.Hash{plumbing.NewHash(mark)}})
	if st2.Commits != 500 || len(inc) < 500*scaleSpec.FilesPerCommit {
		t.Errorf("incremental: %d blobs, %+v", len(inc), st2)
	}
	for _, b := range inc {
		if !seen[b.Hash] {
			t.Errorf("incremental walk reported %s, unknown to the full walk", b.Path)
		}
	}
}

// BenchmarkWalk walks the scale repository (10,000 commits, ~50,000 blobs,
// 1,000 refs), all refs and no stops: the first scan of a repository. It
// reports the peak heap (HeapAlloc sampled every few milliseconds, garbage
// included). "read" also reads every reported blob, as the scanner does;
// "plainopen" uses git.PlainOpen instead of Open; "packs" walks with
// Options.Packs (and reads with a PackReader of the same Packs).
func BenchmarkWalk(b *testing.B) {
	dir, info := scaleRepo(b)
	b.Logf("repository generated in %v", scaleGen.Round(time.Millisecond))
	for _, bc := range []struct {
		name               string
		read, plain, packs bool
	}{{"walk", false, false, false}, {"walk+read", true, false, false}, {"plainopen-walk", false, true, false},
		{"packs-walk", false, false, true}, {"packs-walk+read", true, false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			var peak uint64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var repo *git.Repository
				var err error
				closer := io.Closer(io.NopCloser(nil))
				if bc.plain {
					repo, err = git.PlainOpen(dir)
				} else {
					repo, closer, err = Open(dir, 0)
				}
				if err != nil {
					b.Fatal(err)
				}
				ranges := allRefs(b, repo)
				var opts Options
				var reader *PackReader
				var buf []byte
				if bc.packs {
					if opts.Packs, err = OpenPacks(dir); err != nil {
						b.Fatal(err)
					}
					reader = opts.Packs.NewReader()
				}
				w := New(repo, opts)
				runtime.GC()
				stop := samplePeakHeap()
				b.StartTimer()
				st, err := w.Walk(context.Background(), ranges, func(bl Blob) error {
					switch {
					case bc.read && reader != nil:
						data, _, err := reader.Read(bl.Hash, 1<<20, buf)
						if cap(data) > cap(buf) {
							buf = data
						}
						return err
					case bc.read:
						_, _, err := w.ReadBlob(bl.Hash, 1<<20)
						return err
					}
					return nil
				})
				b.StopTimer()
				peak = max(peak, stop())
				closer.Close()
				if opts.Packs != nil {
					opts.Packs.Close()
				}
				if err != nil {
					b.Fatal(err)
				}
				if st.Blobs != info.Blobs {
					b.Fatalf("%d blobs, want %d", st.Blobs, info.Blobs)
				}
				b.ReportMetric(float64(st.Commits), "commits/op")
				b.ReportMetric(float64(st.Blobs), "blobs/op")
				b.ReportMetric(float64(st.Trees), "trees/op")
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// BenchmarkWalkIncremental is the steady state of the same repository: a
// rescan where main moved on by 100 commits since its watermark and the other
// 999 refs did not move (their tip is their stop).
func BenchmarkWalkIncremental(b *testing.B) {
	dir, info := scaleRepo(b)
	repo, closer, err := Open(dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer closer.Close()
	ranges := allRefs(b, repo)
	for i := range ranges {
		if ranges[i].Ref == "refs/heads/main" {
			ranges[i].Stops = []plumbing.Hash{plumbing.NewHash(info.Commits[9899])}
		} else {
			ranges[i].Stops = []plumbing.Hash{ranges[i].Tip}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := New(repo, Options{}).Walk(context.Background(), ranges, func(Blob) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if st.Commits != 100 || st.EmptyRanges != 999 {
			b.Fatalf("stats %+v", st)
		}
		b.ReportMetric(float64(st.CommitsRead), "commits-read/op")
	}
}

// BenchmarkWalkIncrementalPacks is BenchmarkWalkIncremental with
// Options.Packs.
func BenchmarkWalkIncrementalPacks(b *testing.B) {
	dir, info := scaleRepo(b)
	repo, opts, closer := openRepo(b, dir, true)
	defer closer()
	ranges := incrementalRanges(b, repo, info)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := New(repo, opts).Walk(context.Background(), ranges, func(Blob) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if st.Commits != 100 || st.EmptyRanges != 999 {
			b.Fatalf("stats %+v", st)
		}
		b.ReportMetric(float64(st.CommitsRead), "commits-read/op")
	}
}

// BenchmarkWalkIncrementalOpen is BenchmarkWalkIncremental as a scan runs
// it: on a freshly opened repository (and packs), opening included.
func BenchmarkWalkIncrementalOpen(b *testing.B) {
	dir, info := scaleRepo(b)
	repo, closer, err := Open(dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	ranges := incrementalRanges(b, repo, info)
	closer.Close()
	for _, packs := range []bool{false, true} {
		b.Run(repoModeName(packs), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				repo, opts, closer := openRepo(b, dir, packs)
				st, err := New(repo, opts).Walk(context.Background(), ranges, func(Blob) error { return nil })
				closer()
				if err != nil {
					b.Fatal(err)
				}
				if st.Commits != 100 || st.EmptyRanges != 999 {
					b.Fatalf("stats %+v", st)
				}
			}
		})
	}
}

// incrementalRanges are BenchmarkWalkIncremental's: main moved on by 100
// commits, the other refs not.
func incrementalRanges(b *testing.B, repo *git.Repository, info repogen.Info) []Range {
	ranges := allRefs(b, repo)
	for i := range ranges {
		if ranges[i].Ref == "refs/heads/main" {
			ranges[i].Stops = []plumbing.Hash{plumbing.NewHash(info.Commits[9899])}
		} else {
			ranges[i].Stops = []plumbing.Hash{ranges[i].Tip}
		}
	}
	return ranges
}

// samplePeakHeap samples HeapAlloc until the returned function is called,
// which returns the peak.
func samplePeakHeap() func() uint64 {
	var (
		mu   sync.Mutex
		peak uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		peak = max(peak, ms.HeapAlloc)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		sample()
		close(done)
		wg.Wait()
		return peak
	}
}
