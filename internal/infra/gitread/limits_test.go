package gitread

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
)

// allocated returns the bytes f allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bombs are the crafted packs of issue 20, with what reading them ends in:
// over a limit (ErrLimit).
var bombs = []struct {
	crafted func() *gittest.Crafted
	limits  Limits // zero: the defaults
	// refused is the bound of the entries the Indexer refuses (and
	// leaves out of the index), n how many it refuses.
	refused string
	n       int
	// walks: the walk reads the top's size alone, within the limits (the
	// header of its own delta), and reports it: the scan's read of it is
	// what trips a limit. sizes: so does ObjectSize, which also follows
	// the chain to the type at its bottom.
	walks, sizes bool
}{
	// 179 bytes asked Indexer.Finish for 1 GiB, then 64 GiB.
	{func() *gittest.Crafted { return gittest.NestedDeltas(1<<30, 64<<30) }, Limits{}, "object size", 2, false, false},
	// Levels each within the object limit, and their total over the
	// pack's inflate budget (4 × the object limit for a pack this small):
	// what a pack costs is bounded, not only what each object does. The
	// indexer refuses the chain from its declared sizes: the first level
	// (the largest, first among equals) and every level on it.
	{func() *gittest.Crafted {
		return gittest.NestedDeltas(4<<20, 4<<20, 4<<20, 4<<20, 4<<20, 4<<20)
	}, Limits{MaxObjectBytes: 4 << 20}, "inflated size", 6, true, true},
	{gittest.HugeDeclaredSize, Limits{}, "object size", 1, false, false},
	{gittest.DeltaCycle, Limits{}, "delta chain", 2, true, false},
}

// withLimits sets the limits for the test.
func withLimits(t testing.TB, l Limits) {
	old := limits.Load()
	SetLimits(l)
	t.Cleanup(func() { limits.Store(old) })
}

// A delta bomb indexed as a fetch indexes it: its entries are refused,
// over a limit, before their memory is allocated, and left out of the
// index; the rest of the pack (the commit, its tree, the blob of zeros) is
// indexed, and reads (issue 31: before, the whole pack was an error).
func TestIndexDeltaBombs(t *testing.T) {
	for _, b := range bombs {
		c := b.crafted()
		t.Run(c.Name, func(t *testing.T) {
			withLimits(t, b.limits)
			pack := c.Bytes()
			var ix *Index
			var err error
			n := allocated(func() {
				ix, _, _, err = index(t, pack, IndexOptions{Base: func(plumbing.Hash) (plumbing.ObjectType, []byte, error) {
					return 0, nil, plumbing.ErrObjectNotFound
				}}, false)
			})
			t.Logf("a pack of %d bytes: %v; %d KiB allocated", len(pack), err, n>>10)
			if err != nil {
				t.Fatalf("err = %v, want the bomb refused alone", err)
			}
			if n > 64<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
			if len(ix.Refused) != b.n || ix.Objects()+len(ix.Refused) != c.Pack.Count() {
				t.Fatalf("%d indexed, %v refused; want %d of the %d entries refused", ix.Objects(), ix.Refused, b.n, c.Pack.Count())
			}
			for _, r := range ix.Refused {
				if r.Err.What != b.refused {
					t.Errorf("refused %+v, want over the %s", r, b.refused)
				}
			}
			names := indexNames(t, ix)
			if !names[c.Commit] {
				t.Errorf("the commit is not indexed")
			}
		})
	}
}

// The same bombs in a repository on disk, read as a scan reads them: the
// walk, the blob reads within the scan's limit, and reads of any object.
// Each ends over a limit, with bounded memory: the intermediates of a chain
// are bounded whatever the object at its top, and a chain that loops ends.
func TestReadDeltaBombs(t *testing.T) {
	for _, b := range bombs {
		c := b.crafted()
		t.Run(c.Name, func(t *testing.T) {
			withLimits(t, b.limits)
			dir := filepath.Join(t.TempDir(), "bomb.git")
			c.Write(t, dir)
			top := topBlob(t, dir)
			packs := openPacks(t, dir)
			r := packs.NewReader()
			reads := map[string]func() error{
				"Read": func() error { _, _, err := r.Read(top, 10<<20, nil); return err },
				"ReadObject": func() error {
					_, _, err := r.ReadObject(top, nil)
					return err
				},
				"ObjectSize": func() error { _, _, err := r.ObjectSize(top); return err },
				"Walk": func() error {
					refs, err := ReadRefs(dir)
					if err != nil {
						return err
					}
					_, err = walkBranchesAndTags(t, dir, refs)
					return err
				},
			}
			for name, read := range reads {
				var err error
				n := allocated(func() { err = read() })
				t.Logf("%s: %v; %d KiB allocated", name, err, n>>10)
				switch {
				case name == "Walk" && b.walks, name == "ObjectSize" && b.sizes:
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
				case !errors.Is(err, ErrLimit):
					t.Errorf("%s: err = %v, want ErrLimit", name, err)
				}
				if n > 64<<20 {
					t.Errorf("%s: allocated %d MiB", name, n>>20)
				}
			}
		})
	}
}

// topBlob is the blob the crafted repository's tree names.
func topBlob(t *testing.T, dir string) plumbing.Hash {
	t.Helper()
	refs, err := ReadRefs(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := refs.Resolve("refs/heads/main")
	r := openPacks(t, dir).NewReader()
	_, raw, err := r.ReadObject(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ci commitInfo
	if err := parseCommit(raw, &ci); err != nil {
		t.Fatal(err)
	}
	_, raw, err = r.ReadObject(ci.tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := parseTree(raw)
	if err != nil || len(tr.entries) != 1 {
		t.Fatalf("tree: %v", err)
	}
	return tr.hash(&tr.entries[0])
}

// A tree nested deeper than MaxTreeDepth is refused, not walked; one just
// within it is walked.
func TestWalkTreeDepth(t *testing.T) {
	for _, tt := range []struct {
		depth int
		err   error
	}{{MaxTreeDepth, nil}, {MaxTreeDepth + 1, ErrLimit}, {10_000, ErrLimit}} {
		dir := filepath.Join(t.TempDir(), "deep.git")
		gittest.DeepTree(tt.depth).Write(t, dir)
		refs, err := ReadRefs(dir)
		if err != nil {
			t.Fatal(err)
		}
		st, err := walkBranchesAndTags(t, dir, refs)
		if !errors.Is(err, tt.err) || (tt.err == nil && st.Blobs != 1) {
			t.Errorf("depth %d: %v, %+v; want %v", tt.depth, err, st, tt.err)
		}
	}
}

// A pack over MaxPackBytes stops the indexer as the bytes arrive: the
// file holds no more than the limit.
func TestIndexPackSizeLimit(t *testing.T) {
	dir := genRepo(t, scaleSpecSmall)
	pack := onePack(t, dir)
	f, err := os.Create(filepath.Join(t.TempDir(), "tmp_pack"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	limit := int64(len(pack) / 2)
	x := NewIndexer(f, IndexOptions{Limits: Limits{MaxPackBytes: limit}})
	_, err = x.Write(pack)
	if err == nil {
		_, err = x.Finish()
	} else {
		x.Abort()
	}
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("err = %v, want ErrLimit", err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() > limit {
		t.Fatalf("%d bytes written, limit %d (%v)", fi.Size(), limit, err)
	}
	if _, _, _, err := index(t, pack, IndexOptions{Limits: Limits{MaxPackBytes: int64(len(pack))}}, true); err != nil {
		t.Fatalf("a pack at the limit: %v", err)
	}
}

// Every object held in memory is bounded by MaxObjectBytes, while a whole
// object over it that no delta uses is hashed as it streams in: named, not
// held.
func TestIndexObjectSizeLimit(t *testing.T) {
	big := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
	p := gittest.NewPack()
	_, off := p.Blob(big)
	pack := p.Bytes()
	if _, _, _, err := index(t, pack, IndexOptions{Limits: Limits{MaxObjectBytes: 1 << 19}}, false); err != nil {
		t.Fatalf("a whole object over the limit, no delta on it: %v", err)
	}
	p.OfsDelta(plumbing.ZeroHash, off, gittest.Extend(len(big), "more"))
	pack = p.Bytes()
	// The delta is refused alone (its base would be held), the object
	// indexed.
	ix, _, _, err := index(t, pack, IndexOptions{Limits: Limits{MaxObjectBytes: 1 << 19}, Workers: 1}, false)
	if err != nil || ix.Objects() != 1 || len(ix.Refused) != 1 || ix.Refused[0].Err.What != "object size" {
		t.Fatalf("a delta on it: %v, %+v; want the delta refused over the object size", err, ix)
	}
	if _, _, _, err := index(t, pack, IndexOptions{Limits: Limits{MaxObjectBytes: 2 << 20}}, false); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
}

var scaleSpecSmall = scaleSpec

func init() {
	scaleSpecSmall.Commits, scaleSpecSmall.Refs, scaleSpecSmall.Secrets = 100, 10, nil
}

// onePack returns the bytes of the repository's one pack.
func onePack(t *testing.T, dir string) []byte {
	t.Helper()
	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if err != nil || len(packs) != 1 {
		t.Fatalf("packs: %v, %v", packs, err)
	}
	data, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A pack of about 400 bytes whose four delta levels each declare 239 MiB, over
// the pack's inflate budget by their declared sizes: refused from those
// sizes, before any target is allocated or computed — the whole chain,
// the largest (first) level and the levels on it (issue 31: before, each
// level was resolved and counted until the budget ran out, 496 MiB and
// 12.8 s before the refusal). The rest of the pack is indexed.
func TestIndexRefusesDeclaredSizesOverBudget(t *testing.T) {
	c := gittest.NestedDeltas(239<<20, 239<<20, 239<<20, 239<<20)
	pack := c.Bytes()
	// The budget of so small a pack is 4 × the object limit: 956 MiB,
	// which the four levels and the blob they copy from exceed.
	lim := Limits{MaxObjectBytes: 239 << 20}
	var ix *Index
	var err error
	n := allocated(func() { ix, _, _, err = index(t, pack, IndexOptions{Limits: lim}, false) })
	t.Logf("a pack of %d bytes: %v; %d KiB allocated", len(pack), err, n>>10)
	if err != nil {
		t.Fatal(err)
	}
	if n > 16<<20 {
		t.Errorf("allocated %d MiB: the targets were resolved", n>>20)
	}
	if len(ix.Refused) != 4 || ix.Objects() != c.Pack.Count()-4 || !indexNames(t, ix)[c.Commit] {
		t.Fatalf("%d indexed, refused %+v; want the 4 levels refused, the rest indexed", ix.Objects(), ix.Refused)
	}
	for _, r := range ix.Refused {
		if r.Err.What != "inflated size" {
			t.Errorf("refused %+v, want over the inflated size", r)
		}
	}
	if d := ix.Refused[0].Err.Detail; !strings.Contains(d, "declares a target of 250609664 bytes") {
		t.Errorf("the first level refused for %q, want its declared size", d)
	}
}

// A chain of large deltas within the budget is resolved once per level:
// each level's target is the next one's base, held rather than rebuilt
// from the bottom (it is too large for the resolvers' cache). Before,
// level k was rebuilt k times: what a chain of large objects cost (and
// counted against the pack's budget) grew with the square of its length.
func TestIndexChainOfLargeDeltasOnce(t *testing.T) {
	const level = 8 << 20
	c := gittest.NestedDeltas(level, level, level, level, level, level)
	f, err := os.Create(filepath.Join(t.TempDir(), "tmp_pack"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x := NewIndexer(f, IndexOptions{Workers: 1})
	if _, err := x.Write(c.Bytes()); err != nil {
		t.Fatal(err)
	}
	ix, err := x.Finish()
	if err != nil || len(ix.Refused) != 0 || ix.Objects() != c.Pack.Count() {
		t.Fatalf("%v, %+v; want every level indexed", err, ix)
	}
	// Six levels, once each, the blob of zeros, the commit and tree.
	named := x.named.Load()
	t.Logf("%d MiB resolved", named>>20)
	if named > 6*level+1<<20 {
		t.Errorf("resolved %d MiB for 6 levels of %d MiB: levels resolved again", named>>20, level>>20)
	}
}

// The same chain of four levels of 239 MiB in a repository on disk, read
// as a scan reads it: refused from what its headers declare, before any
// level is allocated (issue 31: before, levels of 239 MiB were resolved,
// 478 MiB allocated, before the budget ran out).
func TestReadRefusesDeclaredChainOverBudget(t *testing.T) {
	withLimits(t, Limits{MaxObjectBytes: 239 << 20})
	c := gittest.NestedDeltas(239<<20, 239<<20, 239<<20, 239<<20)
	dir := filepath.Join(t.TempDir(), "chain.git")
	c.Write(t, dir)
	top := topBlob(t, dir)
	r := openPacks(t, dir).NewReader()
	var err error
	n := allocated(func() { _, _, err = r.ReadObject(top, nil) })
	t.Logf("%v; %d KiB allocated", err, n>>10)
	var limit *LimitError
	if !errors.As(err, &limit) || limit.What != "inflated size" {
		t.Fatalf("err = %v, want over the inflated size", err)
	}
	if n > 16<<20 {
		t.Errorf("allocated %d MiB: levels were resolved", n>>20)
	}
}

// Large deltas nothing is based on are named without being made: the
// pieces their instructions copy go straight to the hash, and no memory is
// allocated for their targets (issue 31: eight delta blobs of 240 MiB took
// a worker to 776 MB before the budget refused them). Their names are
// their contents'.
func TestIndexNamesLeafDeltasUnmade(t *testing.T) {
	sizes := []int64{60 << 20, 61 << 20, 62 << 20, 63 << 20}
	p := gittest.NewPack()
	_, zeros := p.Blob(make([]byte, gittest.ZeroBytes))
	for _, size := range sizes {
		p.OfsDelta(plumbing.ZeroHash, zeros, gittest.Repeat(gittest.ZeroBytes, size))
	}
	pack := p.Bytes()
	var ix *Index
	var err error
	n := allocated(func() { ix, _, _, err = index(t, pack, IndexOptions{}, false) })
	t.Logf("a pack of %d bytes naming %d MiB: %v; %d KiB allocated", len(pack), (60 + 61 + 62 + 63), err, n>>10)
	if err != nil || len(ix.Refused) != 0 {
		t.Fatalf("%v, %+v", err, ix)
	}
	if n > 16<<20 {
		t.Errorf("allocated %d MiB: targets were made", n>>20)
	}
	names := indexNames(t, ix)
	for _, size := range sizes {
		if h := gittest.Hash("blob", make([]byte, size)); !names[h] {
			t.Errorf("%d MiB of zeros (%s) not indexed under its name", size>>20, h)
		}
	}
}
