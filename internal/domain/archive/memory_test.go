package archive

import (
	"archive/zip"
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"gitfleet/internal/devstack/bombs"
)

// allocated is the bytes walk allocates on content.
func allocated(content []byte, opt Options) (walked, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := walk(content, opt)
	runtime.ReadMemStats(&after)
	return got, after.TotalAlloc - before.TotalAlloc
}

// Every level's window counts against one walk's memory: 8 nested zstd
// frames of 16 MiB windows (a few hundred bytes) allocated a window per
// level at once (+514 MiB with 64 MiB windows); now the levels that fit
// are read and the next is refused for memory.
func TestNestedWindowsShareTheWalksMemory(t *testing.T) {
	bomb := bombs.NestedZstd(8, 24, []byte("TOKEN=inner\n"))
	got, n := allocated(bomb, opts(8))
	if len(got.skips) != 1 || got.skips[0].Reason != SkipMemory {
		t.Errorf("skips %+v, want one for memory", got.skips)
	}
	if n > DefaultMemory {
		t.Errorf("a %d-byte blob allocated %d MiB; the walk's memory is %d MiB", len(bomb), n>>20, DefaultMemory>>20)
	}
	// Within the memory the same nesting is read to its end.
	small := bombs.NestedZstd(8, 20, []byte("TOKEN=inner\n"))
	if got := walk(small, opts(8)); got.files[""] != "TOKEN=inner\n" || len(got.skips) != 0 {
		t.Errorf("1 MiB windows: files %v, skips %+v", got.files, got.skips)
	}
}

// A zip's central directory is counted before it is parsed: zip.NewReader
// allocates a File per entry whatever limit on entries applies later.
func TestZipDirectoryCountsBeforeParsing(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 300_000 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprint(i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	got, n := allocated(buf.Bytes(), opts(8))
	if len(got.skips) != 1 || got.skips[0].Reason != SkipMemory {
		t.Errorf("skips %+v, want one for memory", got.skips)
	}
	if n > 1<<20 {
		t.Errorf("a directory of 300,000 entries allocated %d MiB before it was refused", n>>20)
	}
}

// A pool bounds the walks at once: blobs walked in parallel share it. Each
// walk here stays in until released; while 2 are in, the 6 others that
// have started wait (without a pool, they come in as they are scheduled).
func TestPoolBoundsWalksAtOnce(t *testing.T) {
	opt := opts(8)
	opt.Pool = NewPool(2)
	content := zipOf(t, f("a.txt", "a\n"))
	var started, in, most atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			Walk(content, opt, func(Entry) {
				n := in.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				in.Add(-1)
			})
		}()
	}
	for started.Load() < 8 || in.Load() < 2 {
		runtime.Gosched()
	}
	for range 1000 { // let the others run as far as they can
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if most.Load() != 2 {
		t.Errorf("%d walks at once in a pool of 2", most.Load())
	}
}
