package gitread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// Packs holds the pack indexes of a repository, loaded once and shared,
// read-only, by any number of PackReaders: the blob readers of a scanner
// that reads from several goroutines (see PackReader), and the reader of a
// Walker (Options.Packs).
//
// Each index is kept as the bytes of its .idx file (28 to 36 bytes per
// object), mapped into memory rather than read onto the heap where the
// system allows (see mapFile), and searched in place: the fan-out table narrows a lookup to the
// objects whose hash starts with the same byte, then a binary search over
// the sorted names finds it. The pack files stay open; readers read them
// in place where they are mapped in memory (64-bit Linux: see mapPack),
// which spares a system call per object read, with the pages kept
// resident bounded (see pageBudget), and elsewhere with ReadAt; both are
// safe for concurrent use. A mapped pack must not be truncated while it
// is open (a read past its new end would fault): git and gitfleet never
// rewrite a pack in place.
//
// Packs is a snapshot: packs written after OpenPacks are not seen (their
// objects read as not found, see PackReader.Read), and a pack deleted by a
// repack stays readable through its open descriptor until Close.
type Packs struct {
	objects string   // the objects directory
	root    *os.Root // on it: its files are read inside (see openFile)
	packs   []*pack
	done    atomic.Bool // closed
	pages   pageBudget
	mu      sync.Mutex
	spare   *PackReader // a Done Walker's reader, for the next NewReader
	lim     Limits
	// resolved is what the readers resolved (objects inflated and delta
	// targets, counted in chunks), which budget bounds: re-resolving a
	// chain through a big object for every read would otherwise make a
	// small pack cost without end.
	resolved atomic.Int64
	budget   int64
	// progress, if set, is told that a reader is still at work on a large
	// object (OnProgress).
	progress atomic.Pointer[func()]
}

// progressBytes: a reader reports progress (OnProgress) for each object
// over it that it holds, and for each such span it inflates of one.
const progressBytes = 16 << 20

// OnProgress sets fn to be called while the readers resolve a large
// object: for each object over 16 MiB a reader is about to hold (a blob,
// a delta's base, every intermediate of a chain) and for every 16 MiB it
// inflates of one. A single read of a large object (a blob of GiB under a
// raised GITFLEET_MAX_OBJECT_BYTES, a chain of large deltas) can take
// seconds to minutes with no other sign of life: an activity turns these
// calls into heartbeats, so that it is not given up as hung while it
// works. fn is called from the readers' goroutines, concurrently, and
// must be quick.
func (ps *Packs) OnProgress(fn func()) {
	if fn == nil {
		ps.progress.Store(nil)
		return
	}
	ps.progress.Store(&fn)
}

// progressed calls the OnProgress function, if any.
func (ps *Packs) progressed() {
	if fn := ps.progress.Load(); fn != nil {
		(*fn)()
	}
}

// budgetChunk is the unit in which readers charge the Packs' budget.
const budgetChunk = 1 << 20

// charge adds n bytes resolved to the budget.
func (ps *Packs) charge(n int64) error {
	if ps.budget > 0 && ps.resolved.Add(n) > ps.budget {
		return &LimitError{What: "inflated size",
			Detail: fmt.Sprintf("reading packs of %d bytes resolved more than %d bytes", ps.packBytes(), ps.budget)}
	}
	return nil
}

func (ps *Packs) packBytes() int64 {
	var n int64
	for _, p := range ps.packs {
		n += p.end
	}
	return n
}

// pack is one pack file and its index (version 2).
type pack struct {
	path  string
	f     *os.File
	unmap func() error // releases the index's bytes
	// data maps the pack up to end, where the system allows (see
	// mapPack); nil: it is read with ReadAt.
	data      []byte
	unmapData func() error
	blocks    []atomic.Uint64 // of data, read since the last drop (see pageBudget)
	end       int64           // the pack's size minus its trailing checksum: object data ends here
	n         int             // number of objects
	// Tables of the .idx, sliced from its bytes.
	fanout  []byte // 256 big-endian uint32: objects whose first hash byte is <= i
	names   []byte // n sorted 20-byte names
	offsets []byte // n big-endian uint32; MSB set: index into large
	large   []byte // big-endian uint64 offsets
	// refused are the pack's entries its indexer left out of the index
	// (pack-<checksum>.refused, see Refusal).
	refused []Refusal
}

// OpenPacks loads the pack indexes of the repository at repoPath (a bare
// repository, or a work tree with a .git directory, resolved as Open does)
// and opens their packs. A repository without packs is not an error: every
// object is then read as a loose object. Only version 2 indexes are read
// (the only version go-git reads as well; Git has written them by default
// since 2007); an index of another version or a pack that does not match
// its index is an error wrapping ErrCorrupt. An index whose pack is gone is
// skipped, as git skips it. Close the Packs when all its readers are done.
func OpenPacks(repoPath string) (*Packs, error) {
	dir, err := gitDir(repoPath)
	if err != nil {
		return nil, fmt.Errorf("open packs of %s: %w", repoPath, err)
	}
	ps := &Packs{objects: filepath.Join(dir, "objects")}
	ps.pages.max = packResidentBytes
	if fi, err := os.Lstat(ps.objects); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("open packs of %s: %w (no objects directory)", repoPath, git.ErrRepositoryNotExists)
	}
	if ps.root, err = os.OpenRoot(ps.objects); err != nil {
		return nil, fmt.Errorf("open packs of %s: %w", repoPath, err)
	}
	packDir := filepath.Join(ps.objects, "pack")
	ents, err := os.ReadDir(packDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = ps.Close()
		return nil, fmt.Errorf("open packs of %s: %w", repoPath, err)
	}
	type found struct {
		idx   string
		mtime int64
	}
	var idxs []found
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, ".idx") || !e.Type().IsRegular() {
			continue
		}
		var mtime int64
		if fi, err := e.Info(); err == nil {
			mtime = fi.ModTime().UnixNano()
		}
		idxs = append(idxs, found{filepath.Join(packDir, name), mtime})
	}
	// Newest first, as Git searches them: recent objects are the likelier
	// reads. Name order breaks ties, for a deterministic order.
	sort.Slice(idxs, func(i, j int) bool {
		if idxs[i].mtime != idxs[j].mtime {
			return idxs[i].mtime > idxs[j].mtime
		}
		return idxs[i].idx < idxs[j].idx
	})
	for _, f := range idxs {
		p, err := openPack(ps.root, f.idx)
		if errors.Is(err, errNoPack) {
			continue // an index left without its pack: git ignores it too
		}
		if err != nil {
			_ = ps.Close() // the open error is the one to report
			return nil, fmt.Errorf("open packs of %s: %w", repoPath, err)
		}
		ps.packs = append(ps.packs, p)
	}
	ps.lim = CurrentLimits()
	ps.budget = ps.lim.inflateBudget(ps.packBytes())
	return ps, nil
}

// Close closes the pack files. The Packs' readers must not be used after
// (their reads fail).
func (ps *Packs) Close() error {
	if ps.done.Swap(true) {
		return nil
	}
	var first error
	if ps.root != nil {
		first = ps.root.Close()
	}
	for _, p := range ps.packs {
		if err := p.f.Close(); err != nil && first == nil {
			first = err
		}
		if p.unmapData != nil {
			if err := p.unmapData(); err != nil && first == nil {
				first = err
			}
		}
		if p.unmap == nil {
			continue
		}
		if err := p.unmap(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

var idxMagic = []byte{0xff, 't', 'O', 'c'}

// errPacksClosed: a read after Packs.Close.
var errPacksClosed = errors.New("gitread: packs closed")

// errNoPack: an index whose pack is not there.
var errNoPack = errors.New("no pack for the index")

func openPack(root *os.Root, idxPath string) (_ *pack, err error) {
	fi, _, err := openFile(root, "pack/"+filepath.Base(idxPath))
	if err != nil {
		return nil, err
	}
	raw, unmap, err := mapFile(fi)
	fi.Close() // a mapping outlives its descriptor
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = unmap() // the parse error is the one to report
		}
	}()
	p, err := parseIndex(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(idxPath), err)
	}
	p.unmap = unmap
	p.path = strings.TrimSuffix(idxPath, ".idx") + ".pack"
	f, _, err := openFile(root, "pack/"+filepath.Base(p.path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoPack
	}
	if err != nil {
		return nil, err
	}
	if p.refused, err = openRefusals(root, strings.TrimSuffix(filepath.Base(idxPath), ".idx")+".refused"); err != nil {
		f.Close()
		return nil, err
	}
	if err := p.check(f, raw[len(raw)-2*hashSize:len(raw)-hashSize]); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Base(p.path), err)
	}
	p.f = f
	p.data, p.unmapData = mapPack(f, p.end)
	if p.data != nil {
		p.blocks = make([]atomic.Uint64, (len(p.data)>>blockShift)/64+1)
	}
	return p, nil
}

// parseIndex slices the tables of a version 2 pack index:
//
//	magic "\377tOc", version 2
//	fan-out: 256 × uint32
//	names: n × 20 bytes, sorted
//	CRC-32s: n × uint32
//	offsets: n × uint32 (MSB set: the low 31 bits index the large offsets)
//	large offsets: m × uint64
//	pack checksum, index checksum: 2 × 20 bytes
func parseIndex(raw []byte) (*pack, error) {
	const head = 8 + 256*4
	if len(raw) < head+2*hashSize || !bytes.Equal(raw[:4], idxMagic) {
		return nil, fmt.Errorf("%w: not a version 2 pack index", ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(raw[4:8]); v != 2 {
		return nil, fmt.Errorf("%w: pack index version %d not supported", ErrCorrupt, v)
	}
	fanout := raw[8:head]
	prev := uint32(0)
	for i := 0; i < 256; i++ {
		c := binary.BigEndian.Uint32(fanout[4*i:])
		if c < prev {
			return nil, fmt.Errorf("%w: pack index fan-out not monotonic", ErrCorrupt)
		}
		prev = c
	}
	n := int64(prev)
	tables := int64(len(raw)) - head - 2*hashSize
	if n*(hashSize+8) > tables || (tables-n*(hashSize+8))%8 != 0 {
		return nil, fmt.Errorf("%w: pack index of %d objects has %d bytes", ErrCorrupt, n, len(raw))
	}
	namesEnd := head + int(n)*hashSize
	offStart := namesEnd + int(n)*4 // after the CRC-32s
	offEnd := offStart + int(n)*4
	return &pack{
		n:       int(n),
		fanout:  fanout,
		names:   raw[head:namesEnd],
		offsets: raw[offStart:offEnd],
		large:   raw[offEnd : len(raw)-2*hashSize],
	}, nil
}

// check verifies that f is the pack p indexes: its header, object count and
// trailing checksum.
func (p *pack) check(f *os.File, sum []byte) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size < 12+int64(hashSize) {
		return fmt.Errorf("%w: pack of %d bytes", ErrCorrupt, size)
	}
	var hdr [12]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return err
	}
	if string(hdr[:4]) != "PACK" {
		return fmt.Errorf("%w: no pack signature", ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return fmt.Errorf("%w: pack version %d not supported", ErrCorrupt, v)
	}
	if c := binary.BigEndian.Uint32(hdr[8:12]); int64(c) != int64(p.n)+int64(len(p.refused)) {
		if len(p.refused) > 0 {
			return fmt.Errorf("%w: pack has %d objects, its index %d and %d refused", ErrCorrupt, c, p.n, len(p.refused))
		}
		return fmt.Errorf("%w: pack has %d objects, its index %d", ErrCorrupt, c, p.n)
	}
	var trailer [hashSize]byte
	if _, err := f.ReadAt(trailer[:], size-int64(hashSize)); err != nil {
		return err
	}
	if !bytes.Equal(trailer[:], sum) {
		return fmt.Errorf("%w: pack checksum differs from its index's", ErrCorrupt)
	}
	p.end = size - int64(hashSize)
	return nil
}

// find returns the offset of object h in p.
func (p *pack) find(h *plumbing.Hash) (int64, bool, error) {
	lo := 0
	if h[0] > 0 {
		lo = int(binary.BigEndian.Uint32(p.fanout[4*(int(h[0])-1):]))
	}
	hi := int(binary.BigEndian.Uint32(p.fanout[4*int(h[0]):]))
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := bytes.Compare(p.names[m*hashSize:(m+1)*hashSize], h[:])
		switch {
		case c == 0:
			off, err := p.offset(m)
			return off, err == nil, err
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false, nil
}

// offset returns the offset of the i-th object of the index.
func (p *pack) offset(i int) (int64, error) {
	o := binary.BigEndian.Uint32(p.offsets[4*i:])
	off := int64(o)
	if o&0x80000000 != 0 {
		j := int(o & 0x7fffffff)
		if j >= len(p.large)/8 {
			return 0, fmt.Errorf("%w: pack index large offset %d out of range", ErrCorrupt, j)
		}
		u := binary.BigEndian.Uint64(p.large[8*j:])
		if u > 1<<62 {
			return 0, fmt.Errorf("%w: pack index offset %d out of range", ErrCorrupt, u)
		}
		off = int64(u)
	}
	if off < 12 || off >= p.end {
		return 0, fmt.Errorf("%w: pack index offset %d out of range", ErrCorrupt, off)
	}
	return off, nil
}

// Position is where object h lies in the packs: the index of the pack
// holding it and its offset there; ok is false when no pack holds it (a
// loose object, or none) or the packs are closed. Packs place a delta
// after its base and a base next to its deltas, so reading objects in
// this order, each reader taking a run of neighbours, resolves a chain's
// shared bases once instead of once per object.
func (ps *Packs) Position(h plumbing.Hash) (pack int, off int64, ok bool) {
	pack, off, ok, err := ps.find(&h, 0)
	return pack, off, ok && err == nil
}

// find returns the pack holding h and its offset there, looking in pack
// hint first.
func (ps *Packs) find(h *plumbing.Hash, hint int) (int, int64, bool, error) {
	if ps.done.Load() {
		// The indexes may be unmapped: searching them would fault.
		return 0, 0, false, errPacksClosed
	}
	if hint >= 0 && hint < len(ps.packs) {
		if off, ok, err := ps.packs[hint].find(h); ok || err != nil {
			return hint, off, ok, err
		}
	}
	for i, p := range ps.packs {
		if i == hint {
			continue
		}
		if off, ok, err := p.find(h); ok || err != nil {
			return i, off, ok, err
		}
	}
	return 0, 0, false, nil
}

// readAll reads the whole of f onto the heap.
func readAll(f *os.File) ([]byte, func() error, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// Tuning of the pages of mapped packs a reader keeps resident.
const (
	// packResidentBytes bounds how much of its mapped packs a Packs keeps
	// in the process's resident set: beyond that, their pages are
	// dropped (they stay in the page cache).
	packResidentBytes = 16 << 20
	// A read of a mapped pack counts the blocks of blockBytes it touched:
	// on a page fault, Linux maps the pages of the file already in the
	// page cache around the fault, up to 64 KiB aligned on 64 KiB.
	blockShift = 16
	blockBytes = 1 << blockShift
)

// pageBudget keeps the pages of mapped packs a Packs holds resident
// bounded: memory-mapped files count in a process's resident set, and a
// scan reads much of a pack. Readers mark the blocks of the packs they
// read in the packs' bitmaps, and count the blocks newly marked: once
// they are more than packResidentBytes, the bitmaps are cleared and the
// pages of every pack are dropped. (What the process really has resident
// of the packs is no more than the blocks marked, and the reads in
// progress.)
type pageBudget struct {
	used  atomic.Int64 // bytes of the blocks marked
	max   int64        // packResidentBytes (a variable for the tests)
	mu    sync.Mutex
	drops int // for the tests
}

// touched marks the blocks of pack p between offsets from and to (of its
// mapping) as read.
func (ps *Packs) touched(p *pack, from, to int) {
	if p.blocks == nil {
		return
	}
	n := int64(0)
	for b := from >> blockShift; b <= max(from, to-1)>>blockShift; b++ {
		w, bit := &p.blocks[b>>6], uint64(1)<<(b&63)
		if w.Load()&bit == 0 && w.Or(bit)&bit == 0 {
			n++
		}
	}
	// A drop another reader could not take (the lock was held) is taken by
	// the next read, even one that marks nothing new.
	used := ps.pages.used.Load()
	if n > 0 {
		used = ps.pages.used.Add(n * blockBytes)
	}
	if used <= ps.pages.max {
		return
	}
	b := &ps.pages
	if !b.mu.TryLock() {
		return // another reader drops them
	}
	defer b.mu.Unlock()
	if ps.done.Load() || b.used.Load() <= b.max {
		return
	}
	b.drops++
	b.used.Store(0)
	// Blocks read from now on are marked anew (some perhaps dropped: an
	// overestimate).
	for _, p := range ps.packs {
		for i := range p.blocks {
			p.blocks[i].Store(0)
		}
	}
	for _, p := range ps.packs {
		if p.data != nil {
			dropPages(p.data)
		}
	}
}

// openRefusals reads a pack's refusals file, if it has one.
func openRefusals(root *os.Root, name string) ([]Refusal, error) {
	f, _, err := openFile(root, "pack/"+name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs, err := readRefusals(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rs, nil
}
