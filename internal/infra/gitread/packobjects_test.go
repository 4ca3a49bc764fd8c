package gitread

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
)

// gitObject is an object as git cat-file reads it.
type gitObject struct {
	h       plumbing.Hash
	typ     plumbing.ObjectType
	content []byte
}

// catAll reads every object of the repository with git cat-file --batch.
func catAll(t testing.TB, dir string) []gitObject {
	t.Helper()
	cmd := exec.Command("git", "cat-file", "--batch-all-objects", "--batch")
	cmd.Env = append(cmd.Environ(), "GIT_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(bytes.NewReader(out))
	var objs []gitObject
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return objs
		}
		f := strings.Fields(line)
		if err != nil || len(f) != 3 {
			t.Fatalf("cat-file: %q %v", line, err)
		}
		typ, err := plumbing.ParseObjectType(f[1])
		if err != nil {
			t.Fatal(err)
		}
		size, _ := strconv.Atoi(f[2])
		content := make([]byte, size+1)
		if _, err := io.ReadFull(r, content); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, gitObject{plumbing.NewHash(f[0]), typ, content[:size]})
	}
}

// checkObjects reads every object with ReadObject (reusing a buffer) and
// ObjectSize and compares with git's.
func checkObjects(t testing.TB, r *PackReader, objs []gitObject) {
	t.Helper()
	var buf []byte
	for _, o := range objs {
		typ, data, err := r.ReadObject(o.h, buf)
		if err != nil || typ != o.typ || !bytes.Equal(data, o.content) {
			t.Fatalf("ReadObject %s: %s of %d bytes, %v; want %s of %d bytes", o.h, typ, len(data), err, o.typ, len(o.content))
		}
		if cap(data) > cap(buf) {
			buf = data
		}
		typ, size, err := r.ObjectSize(o.h)
		if err != nil || typ != o.typ || size != int64(len(o.content)) {
			t.Fatalf("ObjectSize %s: %s, %d, %v; want %s, %d", o.h, typ, size, err, o.typ, len(o.content))
		}
	}
}

// Every object of a repacked repository (long OFS_DELTA or REF_DELTA
// chains of blobs and trees) reads as git reads it, in several orders,
// with and without the delta base cache; ObjectSize agrees.
func TestPackReaderObjects(t *testing.T) {
	for _, refDeltas := range []bool{false, true} {
		t.Run(fmt.Sprintf("refDeltas=%v", refDeltas), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "r.git")
			spec := packSpec
			spec.Commits = 150
			if _, err := repogen.Generate(dir, spec); err != nil {
				t.Fatal(err)
			}
			addEditHistory(t, dir, 3, 60)
			gittest.Git(t, dir, nil, "-c", fmt.Sprintf("repack.useDeltaBaseOffset=%v", !refDeltas), "repack", "-adf", "-q", "--depth=50", "--window=50")
			objs := catAll(t, dir)
			types := map[plumbing.ObjectType]int{}
			for _, o := range objs {
				types[o.typ]++
			}
			if types[plumbing.CommitObject] == 0 || types[plumbing.TreeObject] == 0 || types[plumbing.BlobObject] == 0 || types[plumbing.TagObject] == 0 {
				t.Fatalf("objects by type: %v", types)
			}
			ps := openPacks(t, dir)
			shuffled := slices.Clone(objs)
			rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			reversed := slices.Clone(objs)
			slices.Reverse(reversed)
			for _, order := range [][]gitObject{objs, shuffled, reversed} {
				for _, cacheBytes := range []int{deltaBaseCacheBytes, 0} {
					r := ps.NewReader()
					r.cache.init(cacheBytes, deltaBaseCacheSlots)
					checkObjects(t, r, order)
					checkObjects(t, r, order) // more cache hits
					if st := r.stats; (st.ofsDeltas == 0) != refDeltas || (st.refDeltas == 0) == refDeltas || st.longestChain < 20 {
						t.Errorf("stats %+v", st)
					}
				}
			}
			// A Walker's reader, which keeps trees.
			checkObjects(t, ps.newReader(walkBaseCacheBytes, walkBaseCacheSlots), shuffled)
		})
	}
}

// Read returns blobs only, also when the delta base cache holds objects of
// other types: a tree itself, or a tree delta whose base is cached.
func TestPackReaderReadBlobsOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	packedRepo(t, dir, packSpec)
	objs := catAll(t, dir)
	ps := openPacks(t, dir)
	r := ps.newReader(walkBaseCacheBytes, walkBaseCacheSlots)
	for _, o := range objs {
		if o.typ != plumbing.BlobObject {
			if _, _, err := r.ReadObject(o.h, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r.cache.used == 0 {
		t.Fatal("nothing cached")
	}
	hits := r.stats.cacheHits
	for _, o := range objs {
		data, size, err := r.Read(o.h, 0, nil)
		switch {
		case o.typ == plumbing.BlobObject && (err != nil || !bytes.Equal(data, o.content)):
			t.Fatalf("Read blob %s: %v", o.h, err)
		case o.typ != plumbing.BlobObject && (!errors.Is(err, plumbing.ErrObjectNotFound) || data != nil || size != 0):
			t.Fatalf("Read %s %s: %d bytes, %v; want not found", o.typ, o.h, len(data), err)
		}
	}
	if r.stats.cacheHits == hits {
		t.Error("the reads of non-blobs did not meet the cache")
	}
	// readNotBlob gives a blob's type without its content.
	for _, o := range objs {
		typ, data, err := r.readObject(o.h, readNotBlob, nil)
		if err != nil || typ != o.typ || (o.typ == plumbing.BlobObject) != (data == nil) && len(o.content) > 0 {
			t.Fatalf("readObject(readNotBlob) %s %s: %s, %d bytes, %v", o.typ, o.h, typ, len(data), err)
		}
	}
}

// Loose objects of every type, and missing objects.
func TestPackReaderLooseObjects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	gittest.Git(t, filepath.Dir(dir), nil, "init", "-q", "--bare", dir)
	blob := strings.TrimSpace(gittest.Git(t, dir, strings.NewReader(strings.Repeat("loose blob\n", 500)), "hash-object", "-w", "--stdin"))
	tree := strings.TrimSpace(gittest.Git(t, dir, strings.NewReader("100644 blob "+blob+"\tf.txt\n"), "mktree"))
	commit := strings.TrimSpace(gittest.Git(t, dir, nil, "-c", "user.name=A", "-c", "user.email=a@example.invalid", "commit-tree", tree, "-m", "loose"))
	tag := strings.TrimSpace(gittest.Git(t, dir, strings.NewReader("object "+commit+"\ntype commit\ntag v1\ntagger A <a@example.invalid> 1700000000 +0000\n\nv1\n"), "mktag"))
	objs := catAll(t, dir)
	if len(objs) != 4 {
		t.Fatalf("%d objects", len(objs))
	}
	ps := openPacks(t, dir)
	r := ps.NewReader()
	checkObjects(t, r, objs)
	if r.stats.loose == 0 {
		t.Errorf("stats %+v", r.stats)
	}
	if typ, data, err := r.readObject(plumbing.NewHash(blob), readNotBlob, nil); err != nil || typ != plumbing.BlobObject || data != nil {
		t.Errorf("readObject(readNotBlob) of a loose blob: %s, %d bytes, %v", typ, len(data), err)
	}
	if _, _, err := r.Read(plumbing.NewHash(tag), 0, nil); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Errorf("Read of a loose tag: %v", err)
	}
	// The result uses the buffer when large enough.
	buf := make([]byte, 0, 1<<16)
	if _, data, err := r.ReadObject(plumbing.NewHash(blob), buf); err != nil || &data[:1][0] != &buf[:1][0] {
		t.Errorf("ReadObject did not use the buffer: %v", err)
	}
	for _, h := range []string{"0000000000000000000000000000000000000000", "0123456789abcdef0123456789abcdef01234567"} {
		if typ, data, err := r.ReadObject(plumbing.NewHash(h), buf); !errors.Is(err, plumbing.ErrObjectNotFound) || data != nil || typ != plumbing.InvalidObject {
			t.Errorf("ReadObject %s: %s, %d bytes, %v", h, typ, len(data), err)
		}
		if _, _, err := r.ObjectSize(plumbing.NewHash(h)); !errors.Is(err, plumbing.ErrObjectNotFound) {
			t.Errorf("ObjectSize %s: %v", h, err)
		}
	}
}

// ObjectSize of a delta takes its type from the cache when a base of its
// chain is there, and reads no more than the start of the delta.
func TestPackReaderObjectSizeHandmade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	gittest.Git(t, filepath.Dir(dir), nil, "init", "-q", "--bare", dir)
	base := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	v1 := append([]byte("v1 "), base[:8000]...)
	d1 := gittest.NewDelta(len(base), len(v1)).Insert([]byte("v1 ")).Copy(0, 8000)
	v2 := append([]byte("v2 "), v1[:5000]...)
	d2 := gittest.NewDelta(len(v1), len(v2)).Insert([]byte("v2 ")).Copy(0, 5000)
	h1, h2 := gittest.Hash("blob", v1), gittest.Hash("blob", v2)
	b := gittest.NewPack()
	baseH, o0 := b.Blob(base)
	o1 := b.OfsDelta(h1, o0, d1)
	b.OfsDelta(h2, o1, d2)
	b.Write(t, dir, "a", false)
	ps := openPacks(t, dir)
	r := ps.NewReader()
	for _, c := range []struct {
		h    plumbing.Hash
		size int
	}{{h2, len(v2)}, {h1, len(v1)}, {baseH, len(base)}} {
		before := r.stats.inflated
		typ, size, err := r.ObjectSize(c.h)
		if err != nil || typ != plumbing.BlobObject || size != int64(c.size) {
			t.Errorf("ObjectSize %s: %s, %d, %v", c.h, typ, size, err)
		}
		if n := r.stats.inflated - before; n > 20 {
			t.Errorf("ObjectSize %s inflated %d bytes", c.h, n)
		}
	}
	// v2 read: v1 and base are cached; so is their type.
	if data, _, err := r.Read(h2, 0, nil); err != nil || !bytes.Equal(data, v2) {
		t.Fatalf("Read: %v", err)
	}
	if _, typ := r.cache.lookup(0, o1); typ != TypeBlob {
		t.Errorf("cached v1 has type %d", typ)
	}
	if typ, size, err := r.ObjectSize(h1); err != nil || typ != plumbing.BlobObject || size != int64(len(v1)) {
		t.Errorf("ObjectSize of a cached object: %s, %d, %v", typ, size, err)
	}
	// Without its type, a delta's size reads no base header.
	if typ, size, err := r.objectSize(h2, false); err != nil || typ != plumbing.InvalidObject || size != int64(len(v2)) {
		t.Errorf("objectSize without type: %s, %d, %v", typ, size, err)
	}
}

// addLooseHistory adds n commits on refs/heads/loose (from main), each
// adding a file under loose/ and modifying one, as loose objects, with an
// annotated tag on the last one and a tag of that tag.
func addLooseHistory(t testing.TB, dir string, n int) {
	t.Helper()
	gitc := func(stdin io.Reader, args ...string) string {
		return strings.TrimSpace(gittest.Git(t, dir, stdin, append([]string{"-c", "user.name=A", "-c", "user.email=a@example.invalid"}, args...)...))
	}
	parent := gitc(nil, "rev-parse", "main")
	top := gitc(nil, "ls-tree", parent) // the top-level entries of main
	var files []string
	for i := 0; i < n; i++ {
		blob := gitc(strings.NewReader(fmt.Sprintf("loose file %d\n%s", i, strings.Repeat("x", 100*i))), "hash-object", "-w", "--stdin")
		files = append(files, fmt.Sprintf("100644 blob %s\tfile%03d.txt", blob, i))
		edited := gitc(strings.NewReader(fmt.Sprintf("edited %d times\n", i)), "hash-object", "-w", "--stdin")
		sub := gitc(strings.NewReader(strings.Join(append(slices.Clone(files), "100644 blob "+edited+"\tedited.txt"), "\n")+"\n"), "mktree")
		tree := gitc(strings.NewReader(top+"\n040000 tree "+sub+"\tloose\n"), "mktree")
		parent = gitc(nil, "commit-tree", tree, "-p", parent, "-m", fmt.Sprint("loose ", i))
	}
	gitc(nil, "update-ref", "refs/heads/loose", parent)
	gitc(nil, "tag", "-a", "-m", "loose tag", "loose-v1", parent)
	gitc(nil, "tag", "-a", "-m", "tag of a tag", "loose-v1-signed", "loose-v1")
}

// walkBoth walks ranges on fresh repositories of dir with go-git only and
// with ps, and compares what they report, in order, and their stats.
func walkBoth(t *testing.T, dir string, ps *Packs, label string, ranges []Range) []Blob {
	t.Helper()
	repo, closer, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	want, wst := walkAll(t, repo, Options{}, ranges...)
	repo2, closer2, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closer2.Close()
	got, gst := walkAll(t, repo2, Options{Packs: ps}, ranges...)
	if gst != wst {
		t.Errorf("%s: stats with packs %+v, go-git %+v", label, gst, wst)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d blobs with packs, %d with go-git", label, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: blob %d with packs %+v, go-git %+v", label, i, got[i], want[i])
		}
	}
	return got
}

// compareModes walks the refs of dir with go-git only and with ps: all of
// them, then incrementally (stops at half the tips, a missing stop, a tag
// stop), then with every tip a stop (nothing new).
func compareModes(t *testing.T, dir string, ps *Packs) {
	t.Helper()
	repo, closer, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	ranges := allRefs(t, repo)
	closer.Close()
	full := walkBoth(t, dir, ps, "full", ranges)
	if len(full) == 0 {
		t.Fatal("nothing walked")
	}
	tags := 0
	for _, r := range ranges {
		if strings.HasPrefix(r.Ref, "refs/tags/v") || strings.HasPrefix(r.Ref, "refs/tags/loose") {
			tags++
		}
	}
	if tags == 0 {
		t.Fatal("no annotated tags")
	}
	var half, all []plumbing.Hash
	for i, r := range ranges {
		if i%2 == 0 {
			half = append(half, r.Tip)
		}
		all = append(all, r.Tip)
	}
	half = append(half, plumbing.NewHash("0123456789012345678901234567890123456789"))
	inc := slices.Clone(ranges)
	for i := range inc {
		inc[i].Stops = half
	}
	walkBoth(t, dir, ps, "incremental", inc)
	for i := range inc {
		inc[i].Stops = all
	}
	if got := walkBoth(t, dir, ps, "nothing new", inc); len(got) != 0 {
		t.Errorf("%d blobs with every tip a stop", len(got))
	}
}

// A walk with Options.Packs reports the same blobs, paths, commits and
// sizes in the same order, with the same stats, as with go-git only: on a
// generated repository (fast-import's pack), repacked with long chains,
// with loose objects and annotated tags (nested too), and with packs
// written after OpenPacks (every such object through go-git).
func TestWalkPacksMatchesGoGit(t *testing.T) {
	spec := smallSpec
	spec.Commits = 300
	spec.Refs = 40
	gen := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "r.git")
		if _, err := repogen.Generate(dir, spec); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	open := func(t *testing.T, dir string) *Packs {
		ps, err := OpenPacks(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
		return ps
	}
	t.Run("generated", func(t *testing.T) {
		dir := gen(t)
		compareModes(t, dir, open(t, dir))
	})
	t.Run("repacked", func(t *testing.T) {
		dir := gen(t)
		addEditHistory(t, dir, 3, 60)
		gittest.Git(t, dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50")
		compareModes(t, dir, open(t, dir))
	})
	t.Run("repacked+loose", func(t *testing.T) {
		dir := gen(t)
		gittest.Git(t, dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50")
		addLooseHistory(t, dir, 12)
		if f := strings.Fields(gittest.Git(t, dir, nil, "count-objects")); len(f) < 1 || f[0] == "0" {
			t.Fatalf("count-objects: %v: no loose objects", f)
		}
		compareModes(t, dir, open(t, dir))
	})
	t.Run("packs after open", func(t *testing.T) {
		dir := gen(t)
		ps := open(t, dir)
		addLooseHistory(t, dir, 12)
		gittest.Git(t, dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50") // deletes the pack ps holds open
		compareModes(t, dir, ps)
	})
}

// countingStorer counts the objects read through go-git.
type countingStorer struct {
	storage.Storer
	reads int
}

func (s *countingStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	s.reads++
	return s.Storer.EncodedObject(t, h)
}

func (s *countingStorer) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	s.reads++
	return s.Storer.EncodedObjectSize(h)
}

// With Options.Packs, go-git reads nothing the packs have, and what they
// lack (a pack written after OpenPacks) it reads.
func TestWalkPacksSparesGoGit(t *testing.T) {
	dir, info := smallRepo(t)
	ps := openPacks(t, dir)
	walk := func() (int, Stats) {
		repo, closer, err := Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		cs := &countingStorer{Storer: repo.Storer}
		crepo, err := git.Open(cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, st := walkAll(t, crepo, Options{Packs: ps}, allRefs(t, repo)...)
		return cs.reads, st
	}
	reads, st := walk()
	if reads != 0 || st.Blobs != info.Blobs {
		t.Errorf("%d objects read through go-git, stats %+v", reads, st)
	}
	addLooseHistory(t, dir, 5)
	gittest.Git(t, dir, nil, "repack", "-adf", "-q")
	reads, st = walk()
	// The 5 commits, their trees (root and loose/), 10 blobs' sizes, 2 tags.
	if reads < 5+10+10+2 || st.Blobs != info.Blobs+10 {
		t.Errorf("%d objects read through go-git, stats %+v", reads, st)
	}
}

// A walk resolves each tree version from the one next to it in its delta
// chain, whichever way the pack's chains run: fast-import deltas each
// version against the one before (the walk's next tree is a delta on the
// one it read last), git repack from the newest down (the chain of an old
// tree runs through the newer versions the walk reads next, which its
// reader must keep). Either way a tree read resolves about one delta, not
// the tens below it in its chain.
func TestWalkResolvesTreeChainsOnce(t *testing.T) {
	spec := smallSpec
	spec.Commits, spec.FilesPerCommit, spec.Refs = 1500, 2, 1
	for _, repack := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "r.git")
		if _, err := repogen.Generate(dir, spec); err != nil {
			t.Fatal(err)
		}
		if repack {
			gittest.Git(t, dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50")
		}
		repo, closer, err := Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := New(repo, Options{Packs: openPacks(t, dir), TreeCacheBytes: 256 << 10})
		if _, err := w.Walk(context.Background(), allRefs(t, repo), func(Blob) error { return nil }); err != nil {
			t.Fatal(err)
		}
		closer.Close()
		st := w.pr.stats
		if st.longestChain < 20 {
			t.Fatalf("repacked %t: longest delta chain %d: the test needs long chains", repack, st.longestChain)
		}
		if perRead := float64(st.ofsDeltas+st.refDeltas) / float64(st.reads); perRead > 2 {
			t.Errorf("repacked %t: %d deltas resolved for %d tree reads (%.1f a read)", repack, st.ofsDeltas+st.refDeltas, st.reads, perRead)
		}
	}
}
