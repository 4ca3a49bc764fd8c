package gitread

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
)

// openPacks opens the packs of the repository at dir for the test.
func openPacks(t testing.TB, dir string) *Packs {
	t.Helper()
	ps, err := OpenPacks(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return ps
}

// packedRepo generates spec's repository at dir and repacks it into one
// pack with long delta chains; extra are more repack arguments.
func packedRepo(t testing.TB, dir string, spec repogen.Spec, extra ...string) repogen.Info {
	t.Helper()
	info, err := repogen.Generate(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	addEditHistory(t, dir, 3, 80)
	gittest.Git(t, dir, nil, append([]string{"repack", "-adf", "-q", "--depth=50", "--window=50"}, extra...)...)
	return info
}

// addEditHistory adds long delta chains' worth of history (see repogen).
func addEditHistory(t testing.TB, dir string, files, versions int) {
	t.Helper()
	if err := repogen.AddEditHistory(dir, files, versions); err != nil {
		t.Fatal(err)
	}
}

type objInfo struct {
	h    plumbing.Hash
	typ  string
	size int64
}

// listObjects lists every object of the repository, by git cat-file.
func listObjects(t testing.TB, dir string) []objInfo {
	t.Helper()
	out := gittest.Git(t, dir, nil, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
	var objs []objInfo
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("cat-file: %q", line)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, objInfo{plumbing.NewHash(f[0]), f[1], size})
	}
	return objs
}

func blobsOf(objs []objInfo) []objInfo {
	var out []objInfo
	for _, o := range objs {
		if o.typ == "blob" {
			out = append(out, o)
		}
	}
	return out
}

// blobEntries returns the offsets and sizes in the pack of the blob entries
// of the repository's packs, by git verify-pack.
func blobEntries(t testing.TB, dir string) [][2]int {
	t.Helper()
	idxs, _ := filepath.Glob(filepath.Join(dir, "objects/pack/*.idx"))
	var out [][2]int
	for _, idx := range idxs {
		for _, line := range strings.Split(gittest.Git(t, dir, nil, "verify-pack", "-v", idx), "\n") {
			f := strings.Fields(line)
			if len(f) >= 5 && f[1] == "blob" {
				inPack, _ := strconv.Atoi(f[3])
				off, _ := strconv.Atoi(f[4])
				out = append(out, [2]int{off, inPack})
			}
		}
	}
	return out
}

// packDeltas runs git verify-pack -v on the packs of dir and returns the
// number of deltified blobs and the longest chain.
func packDeltas(t testing.TB, dir string) (deltas, longest int) {
	t.Helper()
	idxs, _ := filepath.Glob(filepath.Join(dir, "objects/pack/*.idx"))
	for _, idx := range idxs {
		out := gittest.Git(t, dir, nil, "verify-pack", "-v", idx)
		for _, line := range strings.Split(out, "\n") {
			// sha type size size-in-pack offset [depth base-sha]
			f := strings.Fields(line)
			if len(f) == 7 && f[1] == "blob" {
				deltas++
				if d, _ := strconv.Atoi(f[5]); d > longest {
					longest = d
				}
			}
		}
	}
	return deltas, longest
}

// expectedBlobs reads every blob of objs with go-git's ReadBlob.
func expectedBlobs(t testing.TB, dir string, objs []objInfo) map[plumbing.Hash][]byte {
	t.Helper()
	repo, closer, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	want := make(map[plumbing.Hash][]byte, len(objs))
	for _, o := range objs {
		data, size, err := ReadBlob(repo, o.h, 0)
		if err != nil {
			t.Fatalf("ReadBlob %s: %v", o.h, err)
		}
		if size != o.size || int64(len(data)) != size {
			t.Fatalf("ReadBlob %s: %d bytes (size %d), git says %d", o.h, len(data), size, o.size)
		}
		want[o.h] = data
	}
	return want
}

// checkAll reads every blob of objs with r, reusing one buffer, and
// compares with want.
func checkAll(t testing.TB, r *PackReader, objs []objInfo, want map[plumbing.Hash][]byte) {
	t.Helper()
	var buf []byte
	for _, o := range objs {
		data, size, err := r.Read(o.h, 0, buf)
		if err != nil {
			t.Fatalf("Read %s: %v", o.h, err)
		}
		if size != o.size || int64(len(data)) != size || !bytes.Equal(data, want[o.h]) {
			t.Fatalf("Read %s: %d bytes (size %d), want %d bytes", o.h, len(data), size, len(want[o.h]))
		}
		buf = data
	}
}

var packSpec = repogen.Spec{
	Commits:        300,
	FilesPerCommit: 4,
	Refs:           10,
	BlobSize:       1500,
	Binary:         10,
	Seed:           7,
}

// Every blob of a repacked repository (long OFS_DELTA chains) reads the
// same as with go-git, in pack order and in random order, with and without
// the delta base cache.
func TestPackReaderMatchesGoGit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	packedRepo(t, dir, packSpec)
	deltas, longest := packDeltas(t, dir)
	if deltas < 100 || longest < 40 {
		t.Fatalf("verify-pack: %d blob deltas, longest chain %d: the repack made no real chains", deltas, longest)
	}
	objs := listObjects(t, dir)
	blobs := blobsOf(objs)
	want := expectedBlobs(t, dir, blobs)

	ps := openPacks(t, dir)
	if len(ps.packs) != 1 {
		t.Fatalf("%d packs", len(ps.packs))
	}

	shuffled := append([]objInfo(nil), blobs...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	reversed := append([]objInfo(nil), blobs...)
	slices.Reverse(reversed)
	for _, order := range []struct {
		name string
		objs []objInfo
	}{{"hash", blobs}, {"random", shuffled}, {"reverse", reversed}} {
		for _, cacheBytes := range []int{deltaBaseCacheBytes, 0} {
			t.Run(fmt.Sprintf("%s/cache=%d", order.name, cacheBytes), func(t *testing.T) {
				r := ps.NewReader()
				r.cache.init(cacheBytes, deltaBaseCacheSlots)
				checkAll(t, r, order.objs, want)
				// Every blob again: the second pass hits the cache more.
				checkAll(t, r, order.objs, want)
				st := r.stats
				t.Logf("%+v", st)
				if st.ofsDeltas == 0 || st.refDeltas != 0 || st.loose != 0 {
					t.Errorf("stats %+v: want OFS_DELTAs", st)
				}
				if cacheBytes == 0 && st.longestChain < 40 { // the cache cuts chains short
					t.Errorf("longest chain read: %d, want the repack's long chains", st.longestChain)
				}
				if (cacheBytes > 0) != (st.cacheHits > 0) {
					t.Errorf("%d cache hits with a cache of %d bytes", st.cacheHits, cacheBytes)
				}
				if r.cache.used > cacheBytes {
					t.Errorf("cache holds %d bytes, over its %d", r.cache.used, cacheBytes)
				}
			})
		}
	}

	// Other objects are not blobs: not found, as with ReadBlob.
	r := ps.NewReader()
	n := 0
	for _, o := range objs {
		if o.typ == "blob" || n > 20 {
			continue
		}
		n++
		if _, _, err := r.Read(o.h, 0, nil); !errors.Is(err, plumbing.ErrObjectNotFound) {
			t.Errorf("Read of %s %s: %v, want not found", o.typ, o.h, err)
		}
	}
}

// All deltas are REF_DELTAs when the repack does not use offsets.
func TestPackReaderRefDeltas(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	spec := packSpec
	spec.Commits = 150
	if _, err := repogen.Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	addEditHistory(t, dir, 2, 60)
	gittest.Git(t, dir, nil, "-c", "repack.useDeltaBaseOffset=false", "repack", "-adf", "-q", "--depth=50", "--window=50")
	blobs := blobsOf(listObjects(t, dir))
	want := expectedBlobs(t, dir, blobs)
	ps := openPacks(t, dir)
	r := ps.NewReader()
	checkAll(t, r, blobs, want)
	if st := r.stats; st.refDeltas == 0 || st.ofsDeltas != 0 || st.longestChain < 40 {
		t.Errorf("stats %+v: want REF_DELTA chains only", st)
	}
}

// A repository with two packs, the second a thin pack completed by
// index-pack (REF_DELTAs to the bases it appended), and loose objects.
func TestPackReaderSeveralPacks(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "r.git")
	spec := packSpec
	spec.Commits = 150
	info := packedRepo(t, dir, spec)

	// A copy gets 20 more commits, each editing a few files of main's tip;
	// its thin pack of those commits goes back into the original.
	other := filepath.Join(tmp, "o.git")
	gittest.Git(t, tmp, nil, "clone", "-q", "--bare", "--no-local", dir, other)
	files := strings.Fields(gittest.Git(t, other, nil, "ls-tree", "-r", "--name-only", "main"))
	var stream bytes.Buffer
	stream.WriteString("feature done\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter A <a@example.invalid> %d +0000\ndata 4\nmore\n", 1800000000+i)
		if i == 0 {
			fmt.Fprintf(&stream, "from %s\n", info.Head)
		}
		for j := 0; j < 3; j++ {
			path := files[(i*7+j*13)%len(files)]
			content := gittest.Git(t, other, nil, "cat-file", "blob", "main:"+path)
			content = strings.Replace(content, "\n", fmt.Sprintf("\nedit %d %d\n", i, j), 1) + fmt.Sprintf("tail %d\n", i)
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", path, len(content), content)
		}
	}
	stream.WriteString("done\n")
	gittest.Git(t, other, &stream, "fast-import", "--quiet")
	thin := gittest.Git(t, other, strings.NewReader("main\n^"+info.Head+"\n"), "pack-objects", "--thin", "--stdout", "--revs", "-q")
	gittest.Git(t, dir, strings.NewReader(thin), "index-pack", "--stdin", "--fix-thin")
	// And two loose blobs.
	for _, c := range []string{"loose one\n", "loose two, longer: " + strings.Repeat("x", 5000)} {
		gittest.Git(t, dir, strings.NewReader(c), "hash-object", "-w", "--stdin")
	}

	objs := listObjects(t, dir)
	blobs := blobsOf(objs)
	want := expectedBlobs(t, dir, blobs)
	ps := openPacks(t, dir)
	if len(ps.packs) != 2 {
		t.Fatalf("%d packs, want 2", len(ps.packs))
	}
	r := ps.NewReader()
	checkAll(t, r, blobs, want)
	if st := r.stats; st.refDeltas == 0 || st.ofsDeltas == 0 || st.loose != 2 {
		t.Errorf("stats %+v: want OFS_DELTAs, REF_DELTAs and 2 loose objects", st)
	}
	t.Logf("%d blobs, %+v", len(blobs), r.stats)
}

// Loose objects are read without go-git.
func TestPackReaderLoose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	gittest.Git(t, filepath.Dir(dir), nil, "init", "-q", "--bare", dir)
	tmp := t.TempDir()
	contents := map[string]string{
		"empty": "",
		"small": "hello\n",
		"big":   strings.Repeat("all work and no play\n", 5000),
		"nul":   "a\x00b\x00c",
	}
	hashes := map[string]plumbing.Hash{}
	for name, c := range contents {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		hashes[name] = plumbing.NewHash(strings.TrimSpace(gittest.Git(t, dir, nil, "hash-object", "-w", "--no-filters", p)))
	}
	ps := openPacks(t, dir)
	if len(ps.packs) != 0 {
		t.Fatalf("%d packs", len(ps.packs))
	}
	r := ps.NewReader()
	for name, c := range contents {
		data, size, err := r.Read(hashes[name], 0, nil)
		if err != nil || size != int64(len(c)) || string(data) != c {
			t.Errorf("%s: %d bytes, size %d, %v", name, len(data), size, err)
		}
		data, size, err = r.Read(hashes[name], 100, nil)
		switch {
		case len(c) > 100 && (!errors.Is(err, ErrTooLarge) || size != int64(len(c)) || data != nil):
			t.Errorf("%s with limit: %d bytes, size %d, %v", name, len(data), size, err)
		case len(c) <= 100 && (err != nil || string(data) != c):
			t.Errorf("%s with limit: %d bytes, size %d, %v", name, len(data), size, err)
		}
	}
	if r.stats.inflated > 3*100+int64(len(contents["big"])) {
		t.Errorf("inflated %d bytes: the limited read inflated the big blob", r.stats.inflated)
	}
	// A loose commit is not a blob.
	tree := strings.TrimSpace(gittest.Git(t, dir, strings.NewReader(""), "mktree"))
	if _, _, err := r.Read(plumbing.NewHash(tree), 0, nil); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Errorf("loose tree: %v", err)
	}
	// A corrupt loose object is an error.
	p := filepath.Join(dir, "objects", hashes["big"].String()[:2], hashes["big"].String()[2:])
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o644)
	raw[len(raw)/2] ^= 0x55
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Read(hashes["big"], 0, nil); err == nil || errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Errorf("corrupt loose object: %v", err)
	}
}

// Missing objects are not found, and the reader goes on.
func TestPackReaderMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	spec := packSpec
	spec.Commits = 20
	packedRepo(t, dir, spec)
	blobs := blobsOf(listObjects(t, dir))
	ps := openPacks(t, dir)
	r := ps.NewReader()
	for _, h := range []string{"0000000000000000000000000000000000000000", "ffffffffffffffffffffffffffffffffffffffff", "0123456789abcdef0123456789abcdef01234567"} {
		data, size, err := r.Read(plumbing.NewHash(h), 0, make([]byte, 10))
		if !errors.Is(err, plumbing.ErrObjectNotFound) || data != nil || size != 0 {
			t.Errorf("Read %s: %d bytes, size %d, %v", h, len(data), size, err)
		}
	}
	if _, size, err := r.Read(blobs[0].h, 0, nil); err != nil || size != blobs[0].size {
		t.Errorf("Read after a miss: %v", err)
	}
	if _, err := OpenPacks(filepath.Join(t.TempDir(), "nothing")); err == nil {
		t.Error("OpenPacks of no repository succeeded")
	}
}

// The result uses buf's memory when it is large enough.
func TestPackReaderBufferReuse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	spec := packSpec
	spec.Commits = 30
	packedRepo(t, dir, spec)
	blobs := blobsOf(listObjects(t, dir))
	want := expectedBlobs(t, dir, blobs)
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].size > blobs[j].size })
	ps := openPacks(t, dir)
	r := ps.NewReader()
	buf := make([]byte, 0, blobs[0].size)
	for _, o := range blobs {
		data, _, err := r.Read(o.h, 0, buf)
		if err != nil || !bytes.Equal(data, want[o.h]) {
			t.Fatalf("Read %s: %v", o.h, err)
		}
		if len(data) > 0 && &data[:1][0] != &buf[:1][0] {
			t.Fatalf("Read %s did not use the buffer", o.h)
		}
	}
	small := make([]byte, 0, 16)
	data, _, err := r.Read(blobs[0].h, 0, small)
	if err != nil || !bytes.Equal(data, want[blobs[0].h]) || cap(data) < int(blobs[0].size) {
		t.Fatalf("Read into a small buffer: %v", err)
	}
	if cap(small) > 0 && &small[:1][0] == &data[:1][0] {
		t.Fatal("a result larger than the buffer aliases it")
	}

	// Reading a blob already read allocates nothing once the reader is warm.
	if !raceEnabled {
		buf = make([]byte, 0, blobs[0].size)
		allocs := testing.AllocsPerRun(5, func() {
			for _, o := range blobs {
				if _, _, err := r.Read(o.h, 0, buf); err != nil {
					t.Fatal(err)
				}
			}
		})
		// What remains are compress/flate's: it allocates the tables of
		// the long codes of a dynamic Huffman block.
		perBlob := allocs / float64(len(blobs))
		t.Logf("%.3f allocations per blob", perBlob)
		if perBlob > 3 {
			t.Errorf("%.3f allocations per blob read", perBlob)
		}
	}
}

// With a limit, a larger blob is not inflated, a delta's bases not read.
func TestPackReaderLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	gittest.Git(t, filepath.Dir(dir), nil, "init", "-q", "--bare", dir)
	rng := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = "abcdefghij\n"[rng.IntN(11)]
	}
	var stream bytes.Buffer
	for v := 0; v < 3; v++ {
		content := append([]byte(fmt.Sprintf("version %d\n", v)), big...)
		content = append(content, fmt.Sprintf("end of version %d\n", v)...)
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter A <a@example.invalid> %d +0000\ndata 2\nv\n", 1700000000+v)
		fmt.Fprintf(&stream, "M 100644 inline big.txt\ndata %d\n%s\n", len(content), content)
		fmt.Fprintf(&stream, "M 100644 inline small.txt\ndata 8\nsmall %d\n\n", v)
	}
	gittest.Git(t, dir, &stream, "fast-import", "--quiet")
	gittest.Git(t, dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50")
	if deltas, _ := packDeltas(t, dir); deltas < 2 {
		t.Fatalf("%d blob deltas: the big blob's versions should be deltas", deltas)
	}
	blobs := blobsOf(listObjects(t, dir))
	want := expectedBlobs(t, dir, blobs)
	ps := openPacks(t, dir)
	const limit = 1 << 20
	r := ps.NewReader()
	buf := make([]byte, 0, 64)
	for _, o := range blobs {
		before := r.stats.inflated
		data, size, err := r.Read(o.h, limit, buf)
		if o.size > limit {
			if !errors.Is(err, ErrTooLarge) || data != nil || size != o.size {
				t.Errorf("Read %s (%d bytes) limit %d: %d bytes, size %d, %v", o.h, o.size, limit, len(data), size, err)
			}
			if n := r.stats.inflated - before; n > 1024 {
				t.Errorf("Read %s over the limit inflated %d bytes", o.h, n)
			}
			continue
		}
		if err != nil || !bytes.Equal(data, want[o.h]) {
			t.Errorf("Read %s (%d bytes) limit %d: %v", o.h, o.size, limit, err)
		}
	}
	// With a limit under the size of the deltas' data, only the start of
	// the data is inflated for the target size.
	r = ps.NewReader()
	for _, o := range blobs {
		before := r.stats.inflated
		data, size, err := r.Read(o.h, 16, nil)
		switch {
		case o.size > 16 && (!errors.Is(err, ErrTooLarge) || data != nil || size != o.size):
			t.Errorf("Read %s (%d bytes) limit 16: size %d, %v", o.h, o.size, size, err)
		case o.size <= 16 && (err != nil || !bytes.Equal(data, want[o.h])):
			t.Errorf("Read %s (%d bytes) limit 16: %v", o.h, o.size, err)
		}
		if n := r.stats.inflated - before; o.size > 16 && n > 32 {
			t.Errorf("Read %s over the limit inflated %d bytes", o.h, n)
		}
	}
	// Without the limit every blob reads, the big ones through deltas.
	r = ps.NewReader()
	checkAll(t, r, blobs, want)
	if r.stats.ofsDeltas == 0 {
		t.Errorf("stats %+v: no delta read", r.stats)
	}
	// Objects over preallocBytes get memory as they inflate.
	defer func(n int) { preallocBytes = n }(preallocBytes)
	preallocBytes = 1000
	r = ps.NewReader()
	checkAll(t, r, blobs, want)
	for _, o := range blobs {
		if data, _, err := r.Read(o.h, 0, nil); err != nil || !bytes.Equal(data, want[o.h]) {
			t.Errorf("Read %s without a buffer: %v", o.h, err)
		}
	}
	// The limit is compared with the size, not the data read so far.
	for _, o := range blobs {
		if _, size, err := r.Read(o.h, o.size, nil); err != nil || size != o.size {
			t.Errorf("Read %s with limit = size: %v", o.h, err)
		}
	}
}

// Corrupt packs are errors, never panics or wrong content.
func TestPackReaderCorrupt(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "r.git")
	spec := packSpec
	spec.Commits = 60
	packedRepo(t, dir, spec)
	blobs := blobsOf(listObjects(t, dir))
	want := expectedBlobs(t, dir, blobs)
	packs, _ := filepath.Glob(filepath.Join(dir, "objects/pack/*.pack"))
	idxs, _ := filepath.Glob(filepath.Join(dir, "objects/pack/*.idx"))
	if len(packs) != 1 || len(idxs) != 1 {
		t.Fatalf("packs %v", packs)
	}
	orig, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	origIdx, err := os.ReadFile(idxs[0])
	if err != nil {
		t.Fatal(err)
	}
	write := func(path string, data []byte) {
		os.Chmod(path, 0o644)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// readAll reads every blob and returns how many failed; a read that
	// succeeds must return the right content.
	readAll := func(label string) int {
		ps, err := OpenPacks(dir)
		if err != nil {
			t.Fatalf("%s: OpenPacks: %v", label, err)
		}
		defer ps.Close()
		r := ps.NewReader()
		failed := 0
		var buf []byte
		for _, o := range blobs {
			data, _, err := r.Read(o.h, 0, buf)
			if err != nil {
				failed++
				if errors.Is(err, ErrTooLarge) {
					t.Errorf("%s: Read %s: %v", label, o.h, err)
				}
				continue
			}
			if !bytes.Equal(data, want[o.h]) {
				t.Errorf("%s: Read %s returned wrong content without error", label, o.h)
			}
			buf = data
		}
		return failed
	}

	entries := blobEntries(t, dir)
	rng := rand.New(rand.NewPCG(5, 6))
	total := 0
	for i := 0; i < 60; i++ {
		data := append([]byte(nil), orig...)
		e := entries[rng.IntN(len(entries))]
		pos := e[0] + rng.IntN(e[1])
		n := 1 + rng.IntN(4)
		for j := 0; j < n && pos+j < len(orig)-20; j++ {
			data[pos+j] ^= byte(1 + rng.IntN(255))
		}
		write(packs[0], data)
		total += readAll(fmt.Sprintf("bytes flipped at %d", pos))
	}
	if total == 0 {
		t.Error("no corruption was detected")
	}
	// Zeroed or random runs, and huge sizes in entry headers.
	for i := 0; i < 20; i++ {
		data := append([]byte(nil), orig...)
		e := entries[rng.IntN(len(entries))]
		pos := e[0] + rng.IntN(e[1])
		for j := 0; j < 64 && pos+j < len(orig)-20; j++ {
			if i%2 == 0 {
				data[pos+j] = 0xff
			} else {
				data[pos+j] = byte(rng.Uint32())
			}
		}
		write(packs[0], data)
		if readAll(fmt.Sprintf("run at %d", pos)) == 0 {
			t.Errorf("run at %d: no corruption detected", pos)
		}
	}
	write(packs[0], orig)
	if n := readAll("restored"); n != 0 {
		t.Fatalf("%d reads failed on the restored pack", n)
	}

	// A truncated pack, or a corrupt index, fails to open.
	write(packs[0], orig[:len(orig)-100])
	if _, err := OpenPacks(dir); !errors.Is(err, ErrCorrupt) {
		t.Errorf("OpenPacks of a truncated pack: %v, want ErrCorrupt", err)
	}
	write(packs[0], orig)
	for _, bad := range [][]byte{origIdx[:100], append([]byte{0, 0, 0, 0}, origIdx[4:]...), origIdx[:len(origIdx)-8]} {
		write(idxs[0], bad)
		if _, err := OpenPacks(dir); !errors.Is(err, ErrCorrupt) {
			t.Errorf("OpenPacks of a corrupt index: %v, want ErrCorrupt", err)
		}
	}
	write(idxs[0], origIdx)

	// An index whose pack is gone is skipped, as git skips it.
	orphan := filepath.Join(filepath.Dir(idxs[0]), "pack-"+strings.Repeat("0", 40)+".idx")
	write(orphan, origIdx)
	if ps, err := OpenPacks(dir); err != nil || len(ps.packs) != len(packs) {
		t.Errorf("OpenPacks with an index without its pack: %v", err)
	} else {
		ps.Close()
	}
	if err := os.Remove(orphan); err != nil {
		t.Fatal(err)
	}
	if readAll("restored") != 0 {
		t.Fatal("reads failed on the restored repository")
	}
}

// Readers of one Packs read at once (run with -race).
func TestPackReaderConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	spec := packSpec
	spec.Commits = 100
	packedRepo(t, dir, spec)
	blobs := blobsOf(listObjects(t, dir))
	want := expectedBlobs(t, dir, blobs)
	ps := openPacks(t, dir)
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := append([]objInfo(nil), blobs...)
			rand.New(rand.NewPCG(uint64(g), 9)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			r := ps.NewReader()
			var buf []byte
			for _, o := range order {
				data, _, err := r.Read(o.h, 0, buf)
				if err != nil || !bytes.Equal(data, want[o.h]) {
					t.Errorf("goroutine %d: Read %s: %v", g, o.h, err)
					return
				}
				buf = data
			}
		}()
	}
	wg.Wait()
}

// Hand-made packs: a REF_DELTA to a base in another pack, OFS_DELTA and
// REF_DELTA chains mixed, 0x10000-byte copies, large offsets, and corrupt
// entries that must fail without allocating what they claim.
func TestPackReaderHandmade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r.git")
	gittest.Git(t, filepath.Dir(dir), nil, "init", "-q", "--bare", dir)

	base := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160,000 bytes
	a := gittest.NewPack()
	baseH, _ := a.Blob(base)
	a.Write(t, dir, "a", false)

	// v1 (pack b, REF_DELTA to pack a): base with a 0x10000 copy, an insert.
	v1 := append(append([]byte("head\n"), base[16:16+0x10000]...), base[:100]...)
	d1 := gittest.NewDelta(len(base), len(v1)).Insert([]byte("head\n")).Copy(16, 0x10000).Copy(0, 100)
	// v2 (OFS_DELTA on v1), v3 (REF_DELTA on v2, same pack).
	v2 := append([]byte("v2 "), v1[:1000]...)
	d2 := gittest.NewDelta(len(v1), len(v2)).Insert([]byte("v2 ")).Copy(0, 1000)
	v3 := append(append([]byte(nil), v2[500:900]...), "tail"...)
	d3 := gittest.NewDelta(len(v2), len(v3)).Copy(500, 400).Insert([]byte("tail"))
	h1, h2, h3 := gittest.Hash("blob", v1), gittest.Hash("blob", v2), gittest.Hash("blob", v3)

	// Corrupt entries, under made-up names.
	name := func(i byte) plumbing.Hash { return plumbing.Hash{0xee, i} }
	hugeBlob, hugeDelta, cycleA, cycleB, copyOut, wrongSrc, badType, shortBlob, truncated := name(1), name(2), name(3), name(4), name(5), name(6), name(7), name(8), name(9)

	b := gittest.NewPack()
	o1 := b.RefDelta(h1, baseH, d1)
	b.OfsDelta(h2, o1, d2)
	b.RefDelta(h3, h2, d3)
	b.Entry(hugeBlob, TypeBlob, 1<<40, nil, []byte("tiny"))                             // size far over what the data can inflate to
	b.RefDelta(hugeDelta, baseH, gittest.NewDelta(len(base), 1<<40).Copy(0, 0x10000))   // target size not what the copies make
	b.RefDelta(cycleA, cycleB, gittest.NewDelta(1, 1).Insert([]byte("a")))              // A on B on A
	b.RefDelta(cycleB, cycleA, gittest.NewDelta(1, 1).Insert([]byte("b")))              //
	b.RefDelta(copyOut, baseH, gittest.NewDelta(len(base), 10).Copy(len(base)-5, 10))   // copy past the base's end
	b.RefDelta(wrongSrc, baseH, gittest.NewDelta(len(base)+1, 3).Insert([]byte("abc"))) // source size differs
	b.Entry(badType, 5, 3, nil, []byte("abc"))                                          // type 5 is reserved
	b.Entry(shortBlob, TypeBlob, 100, nil, []byte("only 12 byte"))                      // data shorter than the size
	b.Raw(truncated, []byte{0x80 | TypeBlob<<4 | 0x0f, 0xff, 0xff})                     // a header running into the end of the pack
	b.Write(t, dir, "b", true)

	ps := openPacks(t, dir)
	r := ps.NewReader()
	for _, c := range []struct {
		h    plumbing.Hash
		want []byte
	}{{h3, v3}, {h2, v2}, {h1, v1}, {baseH, base}, {h3, v3}} {
		data, size, err := r.Read(c.h, 0, nil)
		if err != nil || size != int64(len(c.want)) || !bytes.Equal(data, c.want) {
			t.Errorf("Read %s: %d bytes, size %d, %v", c.h, len(data), size, err)
		}
	}
	if st := r.stats; st.refDeltas < 2 || st.ofsDeltas < 1 || st.longestChain != 4 {
		t.Errorf("stats %+v", st)
	}
	// The limit is checked on the size of the delta's header, without
	// reading its bases.
	r = ps.NewReader()
	for _, limit := range []int64{1000, 5} { // above and below the size of the delta data
		before := r.stats.inflated
		if _, size, err := r.Read(h1, limit, nil); !errors.Is(err, ErrTooLarge) || size != int64(len(v1)) || r.stats.inflated-before > int64(len(d1)) {
			t.Errorf("Read with limit %d: size %d, %v, %d bytes inflated", limit, size, err, r.stats.inflated-before)
		}
	}

	// A target declared over the object limit and a chain that never ends
	// are over a limit (refused on the delta's header, and at the chain's
	// 10,000th link), the rest corrupt.
	overLimit := map[plumbing.Hash]bool{hugeDelta: true, cycleA: true, cycleB: true}
	for _, h := range []plumbing.Hash{hugeBlob, hugeDelta, cycleA, cycleB, copyOut, wrongSrc, badType, shortBlob, truncated} {
		var before, after runtimeMem
		before.read()
		data, _, err := r.Read(h, 0, nil)
		after.read()
		if want := map[bool]error{false: ErrCorrupt, true: ErrLimit}[overLimit[h]]; !errors.Is(err, want) || data != nil {
			t.Errorf("Read %s: %d bytes, %v; want %v", h, len(data), err, want)
		}
		if d := after.total - before.total; d > 8<<20 {
			t.Errorf("Read %s allocated %d bytes", h, d)
		}
		t.Logf("%v", err)
	}
	// Good objects still read after the errors.
	if data, _, err := r.Read(h2, 0, nil); err != nil || !bytes.Equal(data, v2) {
		t.Errorf("Read after errors: %v", err)
	}
}

// The delta base cache stays within its bytes, evicting and reusing memory.
func TestBaseCache(t *testing.T) {
	var c baseCache
	c.init(8<<10, 16) // 16 slots of up to 1 KiB: full before all are taken
	contents := make([][]byte, 1000)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte(i)}, 100+i*37%900)
	}
	data := func(i int) []byte { return contents[i] }
	for i := 0; i < 1000; i++ {
		c.put(i%3, int64(i), data(i))
		if c.used > c.max {
			t.Fatalf("put %d: %d bytes used, max %d", i, c.used, c.max)
		}
		if got := c.get(i%3, int64(i)); !bytes.Equal(got, data(i)) {
			t.Fatalf("get %d after put: %d bytes", i, len(got))
		}
		// Whatever is still cached is right.
		for j := max(0, i-40); j < i; j++ {
			if got := c.get(j%3, int64(j)); got != nil && !bytes.Equal(got, data(j)) {
				t.Fatalf("get %d: wrong data", j)
			}
		}
	}
	used := 0
	for _, s := range c.slots {
		used += cap(s.data)
	}
	if used != c.used {
		t.Errorf("slots hold %d bytes, accounted %d", used, c.used)
	}
	c.put(0, 1, make([]byte, c.max/4+1)) // too big: not cached
	if c.get(0, 1) != nil {
		t.Error("an object over a quarter of the cache was cached")
	}
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 64; i++ {
			c.put(i%3, int64(i), data(i%8))
		}
	})
	if allocs > 1 {
		t.Errorf("%.1f allocations per 64 puts of similar sizes", allocs)
	}
	if c.used > c.max {
		t.Errorf("%d bytes used, max %d", c.used, c.max)
	}
}

// Deltas never panic, and what they produce has the header's size.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("base data here"), []byte(gittest.NewDelta(14, 7).Copy(5, 4).Insert([]byte("abc"))))
	f.Add([]byte("x"), []byte{1, 2, 0x91, 0, 1})
	f.Add([]byte{}, []byte{0, 0})
	f.Add([]byte("abc"), []byte{3, 0x80, 0x80, 0x80, 0x80, 4, 0xff, 1, 2, 3, 4, 5, 6, 7})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		out, err := ApplyDelta(nil, base, delta)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		_, tgt, _, _ := DeltaSizes(delta)
		if uint64(len(out)) != tgt {
			t.Fatalf("%d bytes for a target of %d", len(out), tgt)
		}
	})
}

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}

// The benchmark repository: 5,000 commits of 5 files, ~25,000 blobs of
// ~2 KiB (49 MB), repacked with long delta chains.
var readSpec = repogen.Spec{
	Commits:        5000,
	FilesPerCommit: 5,
	Refs:           100,
	BlobSize:       2048,
	Binary:         50,
	Seed:           42,
}

var (
	readOnce  sync.Once
	readDir   string
	readBlobs []Blob
	readBytes int64
)

// readRepo returns the benchmark repository and its blobs in walk order
// (the order a scanner reads them).
func readRepo(b *testing.B) (string, []Blob, int64) {
	b.Helper()
	readOnce.Do(func() {
		dir := filepath.Join(tmpRoot, "read.git")
		if _, err := repogen.Generate(dir, readSpec); err != nil {
			b.Fatal(err)
		}
		if _, err := gittest.Run(dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50"); err != nil {
			b.Fatal(err)
		}
		repo, closer, err := Open(dir, 0)
		if err != nil {
			b.Fatal(err)
		}
		readBlobs, _ = walkAll(b, repo, Options{}, allRefs(b, repo)...)
		closer.Close()
		for _, bl := range readBlobs {
			readBytes += bl.Size
		}
		readDir = dir
	})
	if readDir == "" {
		b.Fatal("no benchmark repository")
	}
	return readDir, readBlobs, readBytes
}

// BenchmarkReadBlobs reads every blob of a repacked repository (~25,000
// blobs, 49 MB; one op reads them all, in walk order) with go-git
// (ReadBlobInto on a repository from Open, as the scanner's readers) and
// with a PackReader, each reusing one buffer. "parallel" reads with
// GOMAXPROCS goroutines, each with its own go-git repository or PackReader
// (one Packs shared), opened within the op; it reports the peak heap and,
// on Linux, the peak RSS of the op (run one sub-benchmark per process for
// a clean RSS figure).
func BenchmarkReadBlobs(b *testing.B) {
	dir, blobs, total := readRepo(b)
	const limit = 1 << 20
	b.Run("go-git", func(b *testing.B) {
		repo, closer, err := Open(dir, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		defer closer.Close()
		var buf []byte
		benchReads(b, blobs, total, func(h plumbing.Hash) error {
			data, _, err := ReadBlobInto(repo, h, limit, buf)
			buf = data[:0]
			return err
		})
	})
	b.Run("packreader", func(b *testing.B) {
		ps, err := OpenPacks(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer ps.Close()
		r := ps.NewReader()
		var buf []byte
		benchReads(b, blobs, total, func(h plumbing.Hash) error {
			data, _, err := r.Read(h, limit, buf)
			buf = data[:0]
			return err
		})
		b.Logf("%+v", r.stats)
	})
	workers := runtime.GOMAXPROCS(0)
	b.Run("parallel/go-git", func(b *testing.B) {
		benchParallel(b, blobs, total, workers, func() (func(plumbing.Hash, []byte) ([]byte, error), func()) {
			repo, closer, err := Open(dir, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			return func(h plumbing.Hash, buf []byte) ([]byte, error) {
				data, _, err := ReadBlobInto(repo, h, limit, buf)
				return data, err
			}, func() { closer.Close() }
		})
	})
	b.Run("parallel/packreader", func(b *testing.B) {
		var ps *Packs
		var once sync.Once
		benchParallel(b, blobs, total, workers, func() (func(plumbing.Hash, []byte) ([]byte, error), func()) {
			once.Do(func() {
				var err error
				if ps, err = OpenPacks(dir); err != nil {
					b.Fatal(err)
				}
			})
			r := ps.NewReader()
			return func(h plumbing.Hash, buf []byte) ([]byte, error) {
				data, _, err := r.Read(h, limit, buf)
				return data, err
			}, func() { once = sync.Once{}; ps.Close() }
		})
	})
}

func benchReads(b *testing.B, blobs []Blob, total int64, read func(plumbing.Hash) error) {
	if err := read(blobs[0].Hash); err != nil { // load the indexes
		b.Fatal(err)
	}
	b.SetBytes(total)
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, bl := range blobs {
			if err := read(bl.Hash); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(len(blobs))
	b.ReportMetric(float64(len(blobs)), "blobs/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/blob")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/blob")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/blob")
}

// benchParallel reads blobs with workers goroutines, each with a reader
// from open (called from the goroutine; its second result closes it).
func benchParallel(b *testing.B, blobs []Blob, total int64, workers int,
	open func() (func(plumbing.Hash, []byte) ([]byte, error), func())) {
	b.SetBytes(total)
	b.ReportAllocs()
	var peakHeap, peakRSS float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		debug.FreeOSMemory()
		resetPeakRSS()
		stop := samplePeakHeap()
		b.StartTimer()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var closers []func()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				read, closer := open()
				mu.Lock()
				closers = append(closers, closer)
				mu.Unlock()
				var buf []byte
				for j := w; j < len(blobs); j += workers {
					data, err := read(blobs[j].Hash, buf)
					if err != nil {
						b.Error(err)
						return
					}
					buf = data[:0]
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		peakHeap = max(peakHeap, float64(stop())/(1<<20))
		peakRSS = max(peakRSS, float64(readPeakRSS())/(1<<20))
		for _, c := range closers {
			c()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(workers), "readers")
	b.ReportMetric(peakHeap, "peak-heap-MB")
	if peakRSS > 0 {
		b.ReportMetric(peakRSS, "peak-rss-MB")
	}
}

// resetPeakRSS resets the process's peak RSS (Linux: VmHWM).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// readPeakRSS returns the process's peak RSS in bytes since the last
// reset, or 0 where unknown.
func readPeakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
