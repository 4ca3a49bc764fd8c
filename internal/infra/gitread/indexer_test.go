package gitread

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
)

// genRepo generates a repository (annotated tags included) with an edit
// history of long delta chains, repacked as `git repack -adf --depth=50
// --window=50` does.
func genRepo(t testing.TB, spec repogen.Spec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	addEditHistory(t, dir, 3, 60)
	gittest.Git(t, dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50")
	return dir
}

// gitIndex returns the .idx `git index-pack` writes for pack.
func gitIndex(t testing.TB, pack []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	gittest.Git(t, dir, nil, "init", "-q", "--bare", ".")
	p := filepath.Join(dir, "in.pack")
	if err := os.WriteFile(p, pack, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, nil, "index-pack", "-o", filepath.Join(dir, "out.idx"), p)
	idx, err := os.ReadFile(filepath.Join(dir, "out.idx"))
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// index streams pack through an Indexer in writes of random sizes (or with
// ReadFrom) and returns the index, the .idx bytes and the file written.
func index(t testing.TB, pack []byte, opts IndexOptions, readFrom bool) (*Index, []byte, []byte, error) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "tmp_pack"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x := NewIndexer(f, opts)
	if readFrom {
		if _, err := x.ReadFrom(bytes.NewReader(pack)); err != nil {
			x.Abort()
			return nil, nil, nil, err
		}
	} else {
		rng := rand.New(rand.NewPCG(uint64(len(pack)), 1))
		for p := pack; len(p) > 0; {
			n := min(len(p), 1+rng.IntN(70000))
			if rng.IntN(4) == 0 {
				n = min(len(p), 1+rng.IntN(30))
			}
			if _, err := x.Write(p[:n]); err != nil {
				x.Abort()
				return nil, nil, nil, err
			}
			p = p[n:]
		}
	}
	ix, err := x.Finish()
	if err != nil {
		return nil, nil, nil, err
	}
	var idx bytes.Buffer
	if _, err := ix.WriteTo(&idx); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return ix, idx.Bytes(), file, nil
}

// setTuning sets a tuning variable for the test.
func setTuning[T any](t testing.TB, v *T, to T) {
	old := *v
	*v = to
	t.Cleanup(func() { *v = old })
}

// The index of packs of generated repositories is byte for byte the one
// `git index-pack` writes, with OFS_DELTAs or REF_DELTAs, whether the
// deltas are resolved while the pack streams in or after, from the file,
// with caches too small to hold a chain, on one goroutine or several.
func TestIndexMatchesGit(t *testing.T) {
	repo := genRepo(t, repogen.Spec{Commits: 200, FilesPerCommit: 4, Refs: 12, BlobSize: 1500, Binary: 4, Seed: 42})
	if out := gittest.Git(t, repo, nil, "for-each-ref", "--format=%(objecttype)", "refs/tags"); !strings.Contains(out, "tag") {
		t.Fatal("no annotated tag in the repository")
	}
	configs := []struct {
		name                 string
		stream, worker, chnk int
		workers              int
		readFrom             bool
	}{
		{"defaults", streamCacheBytes, workerCacheBytes, chunkBytes, 0, true},
		{"after the stream, 1 worker", 0, workerCacheBytes, chunkBytes, 1, false},
		{"after the stream, tiny caches, 3 workers", 0, 1 << 10, 1000, 3, false},
		{"small stream cache, tiny chunks", 64 << 10, 8 << 10, 37, 2, false},
	}
	for _, kind := range []string{"ofs", "ref"} {
		args := []string{"pack-objects", "--all", "--stdout", "-q"}
		if kind == "ofs" {
			args = append(args, "--delta-base-offset")
		}
		pack := []byte(gittest.Git(t, repo, nil, args...))
		want := gitIndex(t, pack)
		for _, c := range configs {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				setTuning(t, &streamCacheBytes, c.stream)
				setTuning(t, &workerCacheBytes, c.worker)
				setTuning(t, &chunkBytes, c.chnk)
				ix, idx, file, err := index(t, pack, IndexOptions{Workers: c.workers}, c.readFrom)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(idx, want) {
					t.Fatalf("index differs from git's (%d bytes, git's %d)", len(idx), len(want))
				}
				if !bytes.Equal(file, pack) || ix.Size != int64(len(pack)) || !bytes.Equal(ix.Checksum[:], pack[len(pack)-20:]) {
					t.Fatal("the file is not the pack")
				}
				if ix.ThinBases != 0 {
					t.Fatalf("%d thin bases", ix.ThinBases)
				}
			})
		}
	}
}

// Packs git compresses without compression (stored Deflate blocks) and
// objects over the size limits of the fast paths (inflated with
// the streaming decoder, hashed as they inflate).
func TestIndexStoredAndLargeObjects(t *testing.T) {
	repo := genRepo(t, repogen.Spec{Commits: 40, FilesPerCommit: 3, Refs: 4, BlobSize: 30000, Binary: 3, Seed: 3})
	for _, level := range []string{"0", "1", "9"} {
		pack := []byte(gittest.Git(t, repo, nil, "-c", "pack.compression="+level, "pack-objects", "--all", "--stdout", "-q", "--delta-base-offset", "--no-reuse-object"))
		want := gitIndex(t, pack)
		for _, limit := range []int64{ixPreallocBytes, 4 << 10} {
			t.Run(fmt.Sprintf("level %s limit %d", level, limit), func(t *testing.T) {
				setTuning(t, &ixPreallocBytes, limit)
				setTuning(t, &bigObjectBytes, limit)
				_, idx, _, err := index(t, pack, IndexOptions{}, false)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(idx, want) {
					t.Fatal("index differs from git's")
				}
			})
		}
	}
}

// A thin pack (deltas on objects the receiver has) is completed as `git
// index-pack --fix-thin` does, from IndexOptions.Base: git then indexes the
// completed pack on its own exactly as we did. Without Base it is an error.
func TestIndexThinPack(t *testing.T) {
	repo := genRepo(t, repogen.Spec{Commits: 60, FilesPerCommit: 4, Refs: 2, BlobSize: 1500, Seed: 5})
	for _, kind := range []string{"ofs", "ref"} {
		args := []string{"pack-objects", "--thin", "--revs", "--stdout", "-q"}
		if kind == "ofs" {
			args = append(args, "--delta-base-offset")
		}
		pack := []byte(gittest.Git(t, repo, strings.NewReader("edits\n^edits~20\nmain\n^main~10\n"), args...))
		t.Run(kind, func(t *testing.T) {
			if _, _, _, err := index(t, pack, IndexOptions{}, false); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "thin pack") {
				t.Fatalf("thin pack without Base: %v", err)
			}
			r, err := git.PlainOpen(repo)
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			base := func(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
				calls++
				obj, err := r.Storer.EncodedObject(plumbing.AnyObject, h)
				if err != nil {
					return 0, nil, err
				}
				rd, err := obj.Reader()
				if err != nil {
					return 0, nil, err
				}
				defer rd.Close()
				data, err := io.ReadAll(rd)
				return obj.Type(), data, err
			}
			setTuning(t, &streamCacheBytes, 0)
			ix, idx, file, err := index(t, pack, IndexOptions{Base: base, Workers: 2}, false)
			if err != nil {
				t.Fatal(err)
			}
			if ix.ThinBases == 0 || ix.ThinBases != calls {
				t.Fatalf("%d bases appended, %d read", ix.ThinBases, calls)
			}
			if ix.Size != int64(len(file)) || !bytes.Equal(ix.Checksum[:], file[len(file)-20:]) {
				t.Fatal("checksum or size of the completed pack")
			}
			if want := gitIndex(t, file); !bytes.Equal(idx, want) {
				t.Fatal("index of the completed pack differs from git's")
			}
		})
	}
}

// unnamed names the entries of hand-made packs that tests write no index
// for: the indexer names objects itself.
var unnamed plumbing.Hash

// indexNames returns the names the index lists.
func indexNames(t *testing.T, ix *Index) map[plumbing.Hash]bool {
	t.Helper()
	m := map[plumbing.Hash]bool{}
	for _, e := range ix.entries {
		m[e.hash] = true
	}
	return m
}

// Hand-made packs: REF_DELTAs on objects later in the pack, chains mixing
// both kinds of delta, an object repeated, a pack without objects.
func TestIndexHandmade(t *testing.T) {
	v1 := bytes.Repeat([]byte("version one of the content\n"), 3000) // > 64 KiB: several copies
	v2 := append(append([]byte{}, v1...), "two\n"...)
	v3 := append(append([]byte{}, v2...), "three\n"...)
	v4 := append(append([]byte{}, v3...), "four\n"...)
	b := gittest.NewPack()
	h1 := gittest.Hash("blob", v1)
	h2, h3, h4 := gittest.Hash("blob", v2), gittest.Hash("blob", v3), gittest.Hash("blob", v4)
	b.RefDelta(h4, h3, gittest.Extend(len(v3), "four\n")) // v4 on v3, which comes later
	b.RefDelta(h3, h2, gittest.Extend(len(v2), "three\n"))
	_, o1 := b.Blob(v1)
	b.OfsDelta(h2, o1, gittest.Extend(len(v1), "two\n"))
	b.Blob(v1) // a duplicate
	tree := []byte("100644 a\x00" + string(h1[:]))
	b.Entry(unnamed, gittest.Tree, uint64(len(tree)), nil, tree)
	pack := b.Bytes()
	want := gitIndex(t, pack)
	for _, stream := range []int{streamCacheBytes, 0} {
		setTuning(t, &streamCacheBytes, stream)
		ix, idx, _, err := index(t, pack, IndexOptions{}, false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(idx, want) {
			t.Fatal("index differs from git's")
		}
		names := indexNames(t, ix)
		for _, h := range []plumbing.Hash{h1, h2, h3, h4, gittest.Hash("tree", tree)} {
			if !names[h] {
				t.Errorf("%s not indexed", h)
			}
		}
	}

	empty := gittest.NewPack().Bytes()
	ix, idx, _, err := index(t, empty, IndexOptions{}, false)
	if err != nil || ix.Objects() != 0 || !bytes.Equal(idx, gitIndex(t, empty)) {
		t.Fatalf("empty pack: %v", err)
	}
	if _, _, _, err := index(t, nil, IndexOptions{}, false); !errors.Is(err, ErrEmpty) {
		t.Fatalf("no data: %v, want ErrEmpty", err)
	}
}

// Corrupt packs are errors wrapping ErrCorrupt: every truncation, every
// flipped byte, and hand-made lies, without allocating what headers claim.
func TestIndexCorrupt(t *testing.T) {
	v1 := []byte(strings.Repeat("some content\n", 50))
	b := gittest.NewPack()
	h1, o1 := b.Blob(v1)
	b.OfsDelta(unnamed, o1, gittest.Extend(len(v1), "more\n"))
	b.RefDelta(unnamed, h1, gittest.Extend(len(v1), "else\n"))
	b.Entry(unnamed, gittest.Commit, 4, nil, []byte("tree"))
	good := b.Bytes()
	if _, _, _, err := index(t, good, IndexOptions{}, false); err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(good); n++ {
		if _, _, _, err := index(t, good[:n], IndexOptions{}, false); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("pack truncated to %d bytes: %v", n, err)
		}
	}
	for i := range good {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x10
		if _, _, _, err := index(t, bad, IndexOptions{}, false); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, _, _, err := index(t, append(append([]byte(nil), good...), 0), IndexOptions{}, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("data after the pack: %v", err)
	}

	lies := map[string]func(b *gittest.Pack){
		"size larger than the data": func(b *gittest.Pack) { b.Entry(unnamed, gittest.Blob, 1<<39, nil, []byte("short")) },
		"size smaller than the data": func(b *gittest.Pack) {
			b.Entry(unnamed, gittest.Blob, 3, nil, []byte("longer"))
		},
		"delta size larger than the data": func(b *gittest.Pack) {
			_, o := b.Blob(v1)
			b.Entry(unnamed, gittest.OfsDelta, 1<<38, gittest.OfsDistance(b.Len()-o), gittest.Extend(len(v1), "x"))
		},
		"delta on a base of another size": func(b *gittest.Pack) {
			_, o := b.Blob(v1)
			b.OfsDelta(unnamed, o, gittest.Extend(len(v1)+1, "x"))
		},
		"delta base offset between entries": func(b *gittest.Pack) {
			_, o := b.Blob(v1)
			b.OfsDelta(unnamed, o+1, gittest.Extend(len(v1), "x"))
		},
		"delta base before the pack": func(b *gittest.Pack) {
			b.Entry(unnamed, gittest.OfsDelta, 5, gittest.OfsDistance(b.Len()+100), gittest.Extend(1, "x"))
		},
		"entry type 5": func(b *gittest.Pack) { b.Entry(unnamed, 5, 1, nil, []byte("x")) },
		"huge entry header": func(b *gittest.Pack) {
			b.Raw(unnamed, append(bytes.Repeat([]byte{0xff}, 12), 0))
		},
	}
	for name, lie := range lies {
		b := gittest.NewPack()
		lie(b)
		pack := b.Bytes()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, _, err := index(t, pack, IndexOptions{Base: func(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
			return 0, nil, plumbing.ErrObjectNotFound
		}}, false)
		runtime.ReadMemStats(&after)
		// A delta declaring more than the object limit is refused on its
		// header: over a limit.
		if !errors.Is(err, ErrCorrupt) && !(name == "delta size larger than the data" && errors.Is(err, ErrLimit)) {
			t.Errorf("%s: %v, want a corrupt-data error", name, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
			t.Errorf("%s: allocated %d bytes", name, d)
		}
		t.Logf("%s: %v", name, err)
	}
}

// A delta cycle (two REF_DELTAs whose bases are each other's names) never
// resolves: both entries are refused, over the delta chain, with the names
// the pack gives them, and the rest of the pack is indexed (issue 31:
// before, the whole pack was corrupt). Their refusals survive the
// refusals file.
func TestIndexRefusesDeltaCycle(t *testing.T) {
	v1 := []byte(strings.Repeat("some content\n", 50))
	b := gittest.NewPack()
	h1, _ := b.Blob(v1)
	ha, hb := gittest.Hash("blob", []byte("a")), gittest.Hash("blob", []byte("b"))
	b.RefDelta(unnamed, hb, gittest.Extend(1, "a"))
	b.RefDelta(unnamed, ha, gittest.Extend(1, "b"))
	for _, base := range []func(plumbing.Hash) (plumbing.ObjectType, []byte, error){nil, func(plumbing.Hash) (plumbing.ObjectType, []byte, error) {
		return 0, nil, plumbing.ErrObjectNotFound
	}} {
		ix, _, _, err := index(t, b.Bytes(), IndexOptions{Base: base}, false)
		if base == nil {
			// Without Base, a base the pack lacks is a thin pack's.
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "thin pack") {
				t.Fatalf("without Base: %v, want a thin pack", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if ix.Objects() != 1 || !indexNames(t, ix)[h1] || len(ix.Refused) != 2 {
			t.Fatalf("%d indexed, refused %+v; want the blob indexed, the cycle refused", ix.Objects(), ix.Refused)
		}
		var file bytes.Buffer
		if err := ix.WriteRefusals(&file); err != nil {
			t.Fatal(err)
		}
		back, err := readRefusals(&file)
		if err != nil {
			t.Fatal(err)
		}
		names := map[plumbing.Hash]bool{}
		for i, r := range back {
			if r.Err.What != "delta chain" || r.Offset != ix.Refused[i].Offset || r.Err.Detail != ix.Refused[i].Err.Detail {
				t.Errorf("refusal %+v read back as %+v", ix.Refused[i], r)
			}
			names[r.Name] = true
		}
		if !names[ha] || !names[hb] {
			t.Errorf("refused names %v, want %s and %s", names, ha, hb)
		}
	}
}

// Offsets past 2 GiB go to the large offset table, as git writes it:
// go-git's index decoder reads them back.
func TestIndexLargeOffsets(t *testing.T) {
	ix := &Index{Checksum: plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")}
	offs := []int64{12, 0x7fffffff, 0x80000000, 5 << 30, 1 << 40}
	for i, off := range offs {
		h := gittest.Hash("blob", []byte{byte(i)})
		e := entry{crc: uint32(i * 7), hash: h}
		e.setOff(off)
		ix.entries = append(ix.entries, e)
	}
	var buf bytes.Buffer
	if _, err := ix.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	mi := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(mi); err != nil {
		t.Fatal(err)
	}
	for _, e := range ix.entries {
		off, err := mi.FindOffset(e.hash)
		if err != nil || off != e.off() {
			t.Errorf("offset of %s: %d, %v; want %d", e.hash, off, err, e.off())
		}
		crc, err := mi.FindCRC32(e.hash)
		if err != nil || crc != e.crc {
			t.Errorf("CRC of %s: %d, %v", e.hash, crc, err)
		}
	}
	// 3 offsets need 64 bits: 8+1024+5*(20+4+4)+3*8+40 bytes.
	if want := 8 + 1024 + 5*28 + 3*8 + 40; buf.Len() != want {
		t.Errorf("index of %d bytes, want %d", buf.Len(), want)
	}
}

// Arbitrary data never panics the indexer.
func FuzzIndexer(f *testing.F) {
	v1 := []byte(strings.Repeat("content ", 20))
	b := gittest.NewPack()
	h1, o1 := b.Blob(v1)
	b.OfsDelta(unnamed, o1, gittest.Extend(len(v1), "more"))
	b.RefDelta(unnamed, h1, gittest.Extend(len(v1), "else"))
	f.Add(b.Bytes())
	f.Add(gittest.NewPack().Bytes())
	f.Fuzz(func(t *testing.T, pack []byte) {
		_, _, _, err := index(t, pack, IndexOptions{}, true)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrEmpty) {
			t.Fatalf("error %v is neither ErrCorrupt nor ErrEmpty", err)
		}
	})
}
