package gitread

import (
	"bytes"
	stdflate "compress/flate"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	kflate "github.com/klauspost/compress/flate"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
)

// packStream is one entry's Deflate stream and its inflated size.
type packStream struct {
	data []byte
	size int
}

// realPackStreams generates a repository, repacks it as GitHub serves
// packs (deltas, aggressive window) and returns every entry's stream.
func realPackStreams(b *testing.B) []packStream {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, repogen.Spec{Commits: 3000, FilesPerCommit: 5, BlobSize: 2500, Refs: 20, Seed: 4}); err != nil {
		b.Fatal(err)
	}
	gittest.Git(b, dir, nil, "repack", "-adf", "--window=50")
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		b.Fatalf("%d packs after repack, want 1", len(packs))
	}
	pack, err := os.ReadFile(packs[0])
	if err != nil {
		b.Fatal(err)
	}
	// verify-pack lists each entry's offset.
	out := gittest.Git(b, dir, nil, "verify-pack", "-v", packs[0])
	type ent struct{ off int }
	var ents []ent
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || len(f[0]) != 40 {
			continue
		}
		off, _ := strconv.Atoi(f[4])
		ents = append(ents, ent{off: off})
	}
	var streams []packStream
	for _, e := range ents {
		end := len(pack) - 20
		for _, o := range ents {
			if o.off > e.off && o.off < end {
				end = o.off
			}
		}
		p := pack[e.off:end]
		// Entry header: type and size, then the base of a delta.
		c := p[0]
		typ := (c >> 4) & 7
		size := int(c & 0x0f)
		n, shift := 1, 4
		for c&0x80 != 0 {
			c = p[n]
			size |= int(c&0x7f) << shift
			shift += 7
			n++
		}
		switch typ {
		case 6: // ofs-delta
			for p[n]&0x80 != 0 {
				n++
			}
			n++
		case 7: // ref-delta
			n += 20
		}
		streams = append(streams, packStream{data: p[n+2 : len(p)-4], size: size}) // without zlib header and Adler-32
	}
	return streams
}

// BenchmarkInflate compares Deflate decoders on every entry of a real pack.
// klauspost/compress is the one gitfleet uses. (A hand-written decoder once
// stood here too: 190 MB/s against klauspost's 160 MB/s on this pack, not
// enough to keep 500 lines of Huffman code.)
func BenchmarkInflate(b *testing.B) {
	streams := realPackStreams(b)
	var total int64
	for _, s := range streams {
		total += int64(s.size)
	}
	decoders := []struct {
		name string
		run  func(s packStream, out []byte) error
	}{
		{"compress-flate", func() func(packStream, []byte) error {
			r := stdflate.NewReader(bytes.NewReader(nil))
			return func(s packStream, out []byte) error {
				if err := r.(stdflate.Resetter).Reset(bytes.NewReader(s.data), nil); err != nil {
					return err
				}
				_, err := io.ReadFull(r, out)
				return err
			}
		}()},
		{"klauspost-flate", func() func(packStream, []byte) error {
			r := kflate.NewReader(bytes.NewReader(nil))
			return func(s packStream, out []byte) error {
				if err := r.(kflate.Resetter).Reset(bytes.NewReader(s.data), nil); err != nil {
					return err
				}
				_, err := io.ReadFull(r, out)
				return err
			}
		}()},
	}
	rates := map[string]float64{}
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			out := make([]byte, 0, 1<<20)
			b.SetBytes(total)
			start := time.Now()
			for range b.N {
				for _, s := range streams {
					if cap(out) < s.size {
						out = make([]byte, s.size)
					}
					if err := d.run(s, out[:s.size]); err != nil {
						b.Fatalf("%s: %v", d.name, err)
					}
				}
			}
			rates[d.name] = float64(total) * float64(b.N) / time.Since(start).Seconds() / 1e6
			b.ReportMetric(rates[d.name], "MB/s-inflated")
		})
	}
	fmt.Printf("inflate: %d entries, %.1f MB inflated: compress/flate %.0f MB/s, klauspost/compress %.0f MB/s\n",
		len(streams), float64(total)/1e6, rates["compress-flate"], rates["klauspost-flate"])
}

// realPack generates and repacks a repository and returns its pack's path.
func realPack(b *testing.B, spec repogen.Spec) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, spec); err != nil {
		b.Fatal(err)
	}
	gittest.Git(b, dir, nil, "repack", "-adf", "--window=50")
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		b.Fatalf("%d packs after repack, want 1", len(packs))
	}
	return packs[0]
}

// BenchmarkIndexPack indexes the same received pack with this package's
// indexer and with go-git's packfile parser (as go-git indexes a fetched
// pack: Parser + idxfile.Writer), reporting MB/s and the bytes each
// allocates.
func BenchmarkIndexPack(b *testing.B) {
	path := realPack(b, repogen.Spec{Commits: 3000, FilesPerCommit: 5, BlobSize: 2500, Refs: 20, Seed: 4})
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	want, err := os.ReadFile(strings.TrimSuffix(path, ".pack") + ".idx")
	if err != nil {
		b.Fatal(err)
	}
	indexers := []struct {
		name string
		run  func() ([]byte, error)
	}{
		{"gitread", func() ([]byte, error) {
			f, err := os.CreateTemp(b.TempDir(), "pack")
			if err != nil {
				return nil, err
			}
			defer f.Close()
			x := NewIndexer(f, IndexOptions{})
			if _, err := x.Write(data); err != nil {
				return nil, err
			}
			ix, err := x.Finish()
			if err != nil {
				return nil, err
			}
			var idx bytes.Buffer
			_, err = ix.WriteTo(&idx)
			return idx.Bytes(), err
		}},
		{"go-git", func() ([]byte, error) {
			var w idxfile.Writer
			p, err := packfile.NewParserWithStorage(packfile.NewScanner(bytes.NewReader(data)), nil, &w)
			if err != nil {
				return nil, err
			}
			if _, err := p.Parse(); err != nil {
				return nil, err
			}
			idx, err := w.Index()
			if err != nil {
				return nil, err
			}
			var out bytes.Buffer
			_, err = idxfile.NewEncoder(&out).Encode(idx)
			return out.Bytes(), err
		}},
	}
	for _, ix := range indexers {
		b.Run(ix.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			for range b.N {
				idx, err := ix.run()
				if err != nil {
					b.Fatalf("%s: %v", ix.name, err)
				}
				if !bytes.Equal(idx, want) {
					b.Fatalf("%s: the .idx differs from git index-pack's", ix.name)
				}
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			alloc := float64(after.TotalAlloc-before.TotalAlloc) / float64(b.N) / 1e6
			b.ReportMetric(alloc, "MB-alloc/op")
			fmt.Printf("index-pack %s: %.1f MB pack in %s (%.0f MB/s), %.0f MB allocated\n", ix.name,
				float64(len(data))/1e6, (elapsed / time.Duration(b.N)).Round(time.Millisecond),
				float64(len(data))*float64(b.N)/elapsed.Seconds()/1e6, alloc)
		})
	}
}
