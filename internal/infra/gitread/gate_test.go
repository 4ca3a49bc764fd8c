package gitread

import (
	"bytes"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
)

// Objects over 16 MiB, resolved one goroutine of the process at a time:
// two indexers at once, each with resolving goroutines and a delta too big
// for the stream's budget, both finish with the index git writes.
func TestIndexBigObjectsConcurrently(t *testing.T) {
	p := gittest.NewPack()
	for i := range 3 {
		base := bytes.Repeat([]byte{byte('a' + i)}, 20<<20) // streamed, hashed as it inflates
		_, off := p.Blob(base)
		for j := range 2 {
			p.OfsDelta(plumbing.ZeroHash, off, gittest.Extend(len(base), string(rune('0'+j))))
		}
	}
	small := bytes.Repeat([]byte("small base\n"), 1<<16)
	_, off := p.Blob(small)
	big := noiseBytes(17 << 20) // a delta of 17 MiB: gated in the stream
	p.OfsDelta(plumbing.ZeroHash, off, gittest.NewDelta(len(small), len(small)+len(big)).Copy(0, len(small)).Insert(big))
	pack := p.Bytes()
	want := gitIndex(t, pack)

	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, idx, _, err := index(t, pack, IndexOptions{Workers: 3}, i == 0)
			if err != nil {
				t.Errorf("indexer %d: %v", i, err)
				return
			}
			if !bytes.Equal(idx, want) {
				t.Errorf("indexer %d: the index differs from git's", i)
			}
		}()
	}
	wg.Wait()
}

// noiseBytes is n bytes that do not compress.
func noiseBytes(n int) []byte {
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
