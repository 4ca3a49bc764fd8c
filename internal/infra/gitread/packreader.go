package gitread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/flate"

	"github.com/go-git/go-git/v5/plumbing"
)

// Tuning of a PackReader.
const (
	// packWindowSize is the read-ahead of a reader over a pack.
	packWindowSize = 16 << 10
	// firstFillBytes is what the window reads first after a seek: most
	// entries a seek lands on (a header, a delta, a small object) are
	// smaller, and a short read costs less.
	firstFillBytes = 4 << 10
	// deltaBaseCacheBytes bounds a reader's cache of delta bases; objects
	// over a quarter of it are not cached.
	deltaBaseCacheBytes = 2 << 20
	deltaBaseCacheSlots = 2048 // a power of two
	// A Walker's reader (Options.Packs) keeps more, smaller objects: the
	// latest version of every tree a walk goes through, the base of the
	// next version's delta (not the older versions below it in its chain,
	// and not the version the next one replaced: see targetsOnly). Too
	// small a cache costs much: a tree's chain then resolves from its
	// base, often tens of deltas below.
	walkBaseCacheBytes = 16 << 20
	walkBaseCacheSlots = 65536
	// forwardEvidence bounds PackReader.forward either way, so that a
	// walk through a pack of both kinds follows the kind it is reading.
	forwardEvidence = 64
	// maxDeltaChain bounds a delta chain (Git writes none longer than
	// 4095); it also stops a cycle of REF_DELTAs, which never ends: an
	// error wrapping ErrLimit.
	maxDeltaChain = 10000
	// keepScratchBytes: a reader keeps scratch buffers up to this size
	// between reads; larger ones (a big object's chain) are dropped.
	keepScratchBytes = 4 << 20
	// maxObjectBytes bounds any object's size in a header (what is held
	// in memory is bounded by Limits.MaxObjectBytes); besides, an object
	// cannot inflate to more than maxDeflateRatio times the bytes left in
	// its file (Deflate's densest encoding is about 1032:1).
	maxObjectBytes  = 1 << 40
	maxDeflateRatio = 1040
)

// Objects up to preallocBytes are inflated into memory allocated at once
// from the size in their header. Larger ones get memory as their data
// actually inflates, so a corrupt size costs no huge allocation. (A
// variable for the tests.)
var preallocBytes = 32 << 20

// PackReader reads objects from the packs of a Packs, and loose objects,
// with few allocations: blobs for scanning (Read), commits, trees and tags
// for a walk (ReadObject, ObjectSize; see Options.Packs). It inflates an
// object straight into the caller's buffer,
// applies deltas into buffers it reuses, and reads the pack files through a
// window of its own. It is not safe for concurrent use: give each goroutine
// its own (Packs.NewReader); they share the Packs' indexes and files.
//
// A reader holds about 150 KiB (its read window, inflater and cache
// table, allocated when it first caches), the delta bases it caches (up to
// 4 MiB, filled as chains are resolved; a Walker's reader holds up to 16 MiB
// in a table of 3 MiB) and scratch buffers the size of the largest delta
// chain object it resolved (dropped after the read when over 4 MiB).
type PackReader struct {
	p   *Packs
	win packWindow
	fl  io.ReadCloser // a flate decompressor, Reset for each object
	// mem is what the inflater reads when the window is over a mapped
	// pack: the mapping from the stream on, as a *bytes.Reader, for which
	// the inflater has a path of its own that reads bytes in place (over
	// the window, an io.ByteReader, each byte is a call: on real code a
	// sixth of the scan's CPU). onMem: the inflater reads it (syncWin
	// moves the window past what it read).
	mem    bytes.Reader
	onMem  bool
	last   int // pack of the last hit, searched first
	chain  []chainEntry
	delta  []byte    // inflated delta data of the chain below the target
	tdelta []byte    // inflated delta data of the target
	tmp    [2][]byte // delta chain intermediates
	cache  baseCache // resolved delta bases
	hdr    [32]byte  // small reads: delta sizes, zlib trailers, loose headers
	// targetsOnly: a Walker's reader, which reads each tree's versions
	// oldest first. Trees read (readAny) are cached, and a tree read as a
	// delta on a cached tree replaces it in the cache. Whether the objects
	// below a tree in its delta chain are cached too depends on how the
	// pack was written (see forward).
	targetsOnly bool
	// forward weighs the evidence on the pack's delta direction, for a
	// targetsOnly reader. Packs written by fast-import or received from a
	// push delta each version against the one before: the walk's next read
	// is a delta on the tree it read last, and the older versions below it
	// are never read again, so caching them only evicts what is needed.
	// Packs written by git repack (every pack a Git host serves) delta the
	// other way, from the newest version down: a chain read for an old
	// tree runs through the newer versions the walk reads next, which must
	// be cached or each read resolves tens of deltas again (on a repacked
	// history of 25,000 commits, 2.5 million deltas and 610 MB inflated
	// instead of 0.2 million and 40 MB). A delta on a cached tree the walk
	// read before counts for the first kind, a read of a tree cached only
	// as a base for the second; intermediates are cached while forward is
	// not positive.
	forward int
	// gate is held, during a read, from the first object over gateBytes
	// it materializes to its end.
	gate gateHold
	// spent is what the reader resolved (inflated, and applied deltas)
	// since it last charged the Packs' budget.
	spent int64
	stats readerStats
}

// readerStats count what a reader did, for the tests.
type readerStats struct {
	reads, cacheHits, loose int
	ofsDeltas, refDeltas    int // delta entries resolved
	longestChain            int
	inflated                int64 // bytes inflated
}

// chainEntry is one pack entry of a delta chain.
type chainEntry struct {
	pack int
	off  int64 // the entry's offset: the cache key
	data int64 // offset of its zlib data
	typ  int
	size int64 // inflated size of the data: the object, or the delta
	// A delta's base.
	basePack int
	baseOff  int64
}

func (e *chainEntry) isDelta() bool {
	return e.typ == TypeOfsDelta || e.typ == TypeRefDelta
}

// NewReader returns a reader of ps's objects, for one goroutine: the
// reader of a Walker that is Done, if one was left, with what it cached.
func (ps *Packs) NewReader() *PackReader {
	ps.mu.Lock()
	r := ps.spare
	ps.spare = nil
	ps.mu.Unlock()
	if r != nil {
		return r
	}
	return ps.newReader(deltaBaseCacheBytes, deltaBaseCacheSlots)
}

// adopt keeps r, a reader no longer used, for the next NewReader.
func (ps *Packs) adopt(r *PackReader) {
	r.targetsOnly = false
	ps.mu.Lock()
	ps.spare = r
	ps.mu.Unlock()
}

// newReader returns a reader whose delta base cache holds cacheBytes in
// slots slots (a power of two).
func (ps *Packs) newReader(cacheBytes, slots int) *PackReader {
	r := &PackReader{p: ps}
	r.win.own = make([]byte, packWindowSize)
	r.win.buf = r.win.own
	r.win.acct = ps
	r.fl = flate.NewReader(&r.win)
	r.cache.init(cacheBytes, slots)
	return r
}

// Read returns the content of blob h and its size, in buf's memory when it
// is large enough: a reader of many blobs passes the previous result back
// (as ReadBlobInto) and allocates only to grow it. The returned slice
// aliases buf, and on error is nil: keep buf to reuse it.
//
// With limit > 0, a blob larger than limit is not inflated: Read returns
// nil, the blob's size and an error wrapping ErrTooLarge. The size comes
// from the entry's header or, for a delta, from the start of the delta
// data (inflated in full only when no larger than limit); the delta's
// bases are not inflated.
//
// The blob is looked up in the packs, then as a loose object. An object
// not found there, or that is not a blob, is an error wrapping
// plumbing.ErrObjectNotFound, as ReadBlob's. Objects of alternate object
// directories and of packs written after OpenPacks are not found either: a
// caller that must see them falls back on ReadBlobInto for those errors.
// Corrupt data is an error, never a panic. The sizes in headers are
// checked against the data before memory is allocated for them: no object
// can claim more than Deflate's densest ratio allows for the bytes left in
// its file, objects over 32 MiB get memory only as their data actually
// inflates, and a delta's instructions are checked against its base and
// target sizes before its target is allocated. Read does not hash what it
// returns (neither does go-git): a corrupt index offset that lands on
// another intact object reads that object.
func (r *PackReader) Read(h plumbing.Hash, limit int64, buf []byte) ([]byte, int64, error) {
	r.stats.reads++
	pi, off, ok, err := r.p.find(&h, r.last)
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", h, err)
	}
	if !ok {
		_, data, size, err := r.readLoose(h, readBlobOnly, limit, buf)
		r.gate.release()
		return data, size, err
	}
	r.last = pi
	_, data, size, err := r.readPacked(pi, off, readBlobOnly, limit, buf)
	r.gate.release()
	r.trim()
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, size, fmt.Errorf("blob %s: %d bytes: %w", h, size, ErrTooLarge)
		}
		return nil, 0, fmt.Errorf("blob %s: %s offset %d: %w", h, filepath.Base(r.p.packs[pi].path), off, err)
	}
	return data, size, nil
}

// ReadObject returns the type and content of object h, whatever its type,
// in buf's memory when it is large enough (as Read: the returned slice
// aliases buf, and on error is nil). The object is looked up as Read looks
// up blobs, with the same checks of corrupt data; an object not found is
// an error wrapping plumbing.ErrObjectNotFound. The trees it returns are
// also kept in the delta base cache: a walk reads a tree's next version,
// often a delta on it, soon after.
func (r *PackReader) ReadObject(h plumbing.Hash, buf []byte) (plumbing.ObjectType, []byte, error) {
	return r.readObject(h, readAny, buf)
}

// readObject is ReadObject; with readNotBlob, a blob's content is not read
// (its type is returned, and no data).
func (r *PackReader) readObject(h plumbing.Hash, mode readMode, buf []byte) (plumbing.ObjectType, []byte, error) {
	r.stats.reads++
	pi, off, ok, err := r.p.find(&h, r.last)
	if err != nil {
		return plumbing.InvalidObject, nil, fmt.Errorf("object %s: %w", h, err)
	}
	if !ok {
		typ, data, _, err := r.readLoose(h, mode, 0, buf)
		r.gate.release()
		return plumbing.ObjectType(typ), data, err
	}
	r.last = pi
	typ, data, _, err := r.readPacked(pi, off, mode, 0, buf)
	r.gate.release()
	r.trim()
	if err != nil {
		return plumbing.InvalidObject, nil, fmt.Errorf("object %s: %s offset %d: %w", h, filepath.Base(r.p.packs[pi].path), off, err)
	}
	return plumbing.ObjectType(typ), data, nil
}

// ObjectSize returns the type and size of object h without inflating the
// object: the size comes from the entry's header or, for a delta, from the
// start of the delta data, and a delta's type from the headers of its
// chain down to its base (a delta has its base's type), or from the delta
// base cache. A loose object's come from its header. An object not found
// is an error wrapping plumbing.ErrObjectNotFound.
func (r *PackReader) ObjectSize(h plumbing.Hash) (plumbing.ObjectType, int64, error) {
	return r.objectSize(h, true)
}

// objectSize is ObjectSize; without withType, a delta's type is not looked
// up (InvalidObject is returned for it), which saves reading the headers
// of its chain.
func (r *PackReader) objectSize(h plumbing.Hash, withType bool) (plumbing.ObjectType, int64, error) {
	pi, off, ok, err := r.p.find(&h, r.last)
	if err != nil {
		return plumbing.InvalidObject, 0, fmt.Errorf("object %s: %w", h, err)
	}
	if !ok {
		typ, _, size, err := r.readLoose(h, readSize, 0, nil)
		return plumbing.ObjectType(typ), size, err
	}
	r.last = pi
	typ, size, err := r.packedSize(pi, off, withType)
	if err != nil {
		return plumbing.InvalidObject, 0, fmt.Errorf("object %s: %s offset %d: %w", h, filepath.Base(r.p.packs[pi].path), off, err)
	}
	return plumbing.ObjectType(typ), size, nil
}

// packedSize returns the type and size of the object at pack pi's offset
// off (type 0 for a delta without withType).
func (r *PackReader) packedSize(pi int, off int64, withType bool) (int, int64, error) {
	if data, typ := r.cache.lookup(pi, off); data != nil {
		return typ, int64(len(data)), nil
	}
	e, err := r.header(pi, off)
	if err != nil {
		return 0, 0, err
	}
	if !e.isDelta() {
		return e.typ, e.size, nil
	}
	size, err := r.deltaTargetSize(&e)
	if err != nil || !withType {
		return 0, size, err
	}
	for n := 1; e.isDelta(); n++ {
		if n > maxDeltaChain {
			return 0, 0, chainLimit("a delta chain longer than %d (or a cycle)", maxDeltaChain)
		}
		if data, typ := r.cache.lookup(e.basePack, e.baseOff); data != nil {
			return typ, size, nil
		}
		if e, err = r.header(e.basePack, e.baseOff); err != nil {
			return 0, 0, err
		}
	}
	return e.typ, size, nil
}

// readMode says which objects a read returns.
type readMode uint8

const (
	readBlobOnly readMode = iota // blobs only: another type is errNotBlob
	readAny                      // any type
	readNotBlob                  // any type; a blob's content is not read
	readSize                     // the type and size only (loose objects)
)

var errNotBlob = fmt.Errorf("not a blob: %w", plumbing.ErrObjectNotFound)

// readPacked reads the object at pack pi's offset off and returns its type
// (a pack entry type), content and size.
func (r *PackReader) readPacked(pi int, off int64, mode readMode, limit int64, buf []byte) (int, []byte, int64, error) {
	if data, typ := r.cache.lookup(pi, off); data != nil {
		r.stats.cacheHits++
		if r.targetsOnly && typ == TypeTree && !r.cache.markRead(pi, off) {
			// Cached below another tree, read now: the chains run from
			// the newer versions down.
			r.forward = max(r.forward-1, -forwardEvidence)
		}
		size := int64(len(data))
		switch {
		case mode == readBlobOnly && typ != TypeBlob:
			return 0, nil, 0, fmt.Errorf("%s: %w", plumbing.ObjectType(typ), errNotBlob)
		case mode == readNotBlob && typ == TypeBlob:
			return typ, nil, size, nil
		case limit > 0 && size > limit:
			return typ, nil, size, ErrTooLarge
		}
		out := Sized(buf, len(data))
		copy(out, data)
		return typ, out, size, nil
	}

	// Follow the chain from the object down to its base (a full object),
	// or to a delta base in the cache, reading only the entry headers.
	var cached []byte
	typ := 0
	r.chain = r.chain[:0]
	e, err := r.header(pi, off)
	for {
		if err != nil {
			return 0, nil, 0, err
		}
		r.chain = append(r.chain, e)
		if !e.isDelta() {
			typ = e.typ
			break
		}
		if len(r.chain) > maxDeltaChain {
			return 0, nil, 0, chainLimit("a delta chain longer than %d (or a cycle)", maxDeltaChain)
		}
		if cached, typ = r.cache.lookup(e.basePack, e.baseOff); cached != nil {
			r.stats.cacheHits++
			break
		}
		e, err = r.header(e.basePack, e.baseOff)
	}
	if n := len(r.chain); n > r.stats.longestChain {
		r.stats.longestChain = n
	}
	// A delta has its base's type.
	switch {
	case mode == readBlobOnly && typ != TypeBlob:
		return 0, nil, 0, fmt.Errorf("%s: %w", plumbing.ObjectType(typ), errNotBlob)
	case mode == readNotBlob && typ == TypeBlob:
		return typ, nil, 0, nil
	}

	target := &r.chain[0]
	size := target.size
	haveDelta := false // r.tdelta holds the target's delta
	if target.isDelta() {
		size = -1 // known once the delta is applied
		switch {
		case limit <= 0:
		case target.size <= limit:
			// The delta is no larger than the limit: inflate all of it
			// now, not its start now and all of it again below.
			if err := r.admit(target.size); err != nil {
				return 0, nil, 0, err
			}
			if r.tdelta, err = r.inflate(target, r.tdelta); err != nil {
				return 0, nil, 0, err
			}
			_, tgt, _, err := DeltaSizes(r.tdelta)
			if err != nil {
				return 0, nil, 0, err
			}
			if tgt > uint64(r.p.lim.MaxObjectBytes) {
				return 0, nil, 0, objectLimit("delta target of %d bytes", tgt)
			}
			size, haveDelta = int64(tgt), true
		default:
			if size, err = r.deltaTargetSize(target); err != nil {
				return 0, nil, 0, err
			}
		}
	}
	if limit > 0 && size > limit {
		return typ, nil, size, ErrTooLarge
	}
	// A tree read by a walk is likely the base of the next version's
	// delta (packs written by fast-import or pushed delta the new version
	// against the old, and a walk reads the old one first): keep it too.
	keep := mode == readAny && typ == TypeTree
	keepChain := !keep || !r.targetsOnly || r.forward <= 0
	if !target.isDelta() {
		if err := r.admit(size); err != nil {
			return 0, nil, 0, err
		}
		out, err := r.inflate(target, buf)
		if err != nil {
			return 0, nil, 0, err
		}
		if keep {
			r.cache.add(target.pack, target.off, typ, out)
			r.cache.markRead(target.pack, target.off)
		}
		return typ, out, size, nil
	}

	if err := r.checkDeclared(cached == nil); err != nil {
		return 0, nil, 0, err
	}
	// Resolve the chain upwards: each object is its delta applied to the
	// object below. The intermediates go to the cache.
	top := len(r.chain) - 1
	cur := cached
	held := -1 // which of r.tmp holds cur
	if cur == nil {
		base := &r.chain[top]
		if err := r.admit(base.size); err != nil {
			return 0, nil, 0, err
		}
		if r.tmp[0], err = r.inflate(base, r.tmp[0]); err != nil {
			return 0, nil, 0, err
		}
		cur, held = r.tmp[0], 0
		if keepChain {
			r.cache.add(base.pack, base.off, typ, cur)
		}
		top--
	}
	for i := top; i >= 0; i-- {
		e := &r.chain[i]
		if e.typ == TypeOfsDelta {
			r.stats.ofsDeltas++
		} else {
			r.stats.refDeltas++
		}
		if i == 0 {
			if !haveDelta {
				if err := r.admit(e.size); err != nil {
					return 0, nil, 0, err
				}
				if r.tdelta, err = r.inflate(e, r.tdelta); err != nil {
					return 0, nil, 0, err
				}
			}
			if err := r.admitTarget(r.tdelta); err != nil {
				return 0, nil, 0, err
			}
			out, err := ApplyDelta(buf, cur, r.tdelta)
			if err != nil {
				return 0, nil, 0, err
			}
			if size >= 0 && int64(len(out)) != size { // applyDelta checked it against the same header
				return 0, nil, 0, fmt.Errorf("%w: delta target size changed", ErrCorrupt)
			}
			if keep {
				baseRead := r.targetsOnly && len(r.chain) == 1 && cached != nil && r.cache.markRead(e.basePack, e.baseOff)
				r.cache.add(e.pack, e.off, typ, out)
				r.cache.markRead(e.pack, e.off)
				if baseRead {
					// A delta on the version read before, which it
					// replaces: a walk reads that one no more.
					r.cache.forget(e.basePack, e.baseOff)
					r.forward = min(r.forward+1, forwardEvidence)
				}
			}
			return typ, out, int64(len(out)), nil
		}
		if err := r.admit(e.size); err != nil {
			return 0, nil, 0, err
		}
		if r.delta, err = r.inflate(e, r.delta); err != nil {
			return 0, nil, 0, err
		}
		// Every intermediate is bounded, whatever the object read at the
		// top: a 10-byte blob may sit on a chain of GiB.
		if err := r.admitTarget(r.delta); err != nil {
			return 0, nil, 0, err
		}
		j := 0
		if held == 0 {
			j = 1
		}
		out, err := ApplyDelta(r.tmp[j], cur, r.delta)
		if err != nil {
			return 0, nil, 0, err
		}
		r.tmp[j] = out
		cur, held = out, j
		if keepChain {
			r.cache.add(e.pack, e.off, typ, cur) // after cur's base was used: add may reuse its memory
		}
	}
	panic("unreachable")
}

// header reads the header of the entry at pack pi's offset off:
//
//	1 byte:  more(1) type(3) size bits 0-3
//	more:    more(1) next 7 bits of the size (little-endian groups)
//	OFS_DELTA: base distance, big-endian 7-bit groups, each continued
//	           group adding 1 before the shift (offset = off - distance)
//	REF_DELTA: base hash, 20 bytes
//
// then the zlib data.
func (r *PackReader) header(pi int, off int64) (chainEntry, error) {
	return r.parseHeader(pi, off, true)
}

// parseHeader is header; without resolveRef, a REF_DELTA's base is not
// looked up (its basePack and baseOff are left zero): the indexer's
// workers read the entries of a pack that has no index yet.
func (r *PackReader) parseHeader(pi int, off int64, resolveRef bool) (chainEntry, error) {
	p := r.p.packs[pi]
	r.syncWin()
	r.win.seek(p.f, p, p.end, off)
	e := chainEntry{pack: pi, off: off}
	c, err := r.win.ReadByte()
	if err != nil {
		return e, readErr(err)
	}
	e.typ = int(c>>4) & 7
	size := uint64(c & 0x0f)
	for shift := uint(4); c&0x80 != 0; shift += 7 {
		if shift > 53 {
			return e, fmt.Errorf("%w: entry size overflows", ErrCorrupt)
		}
		if c, err = r.win.ReadByte(); err != nil {
			return e, readErr(err)
		}
		size |= uint64(c&0x7f) << shift
	}
	switch e.typ {
	case TypeCommit, TypeTree, TypeBlob, TypeTag:
	case TypeOfsDelta:
		if c, err = r.win.ReadByte(); err != nil {
			return e, readErr(err)
		}
		dist := uint64(c & 0x7f)
		for c&0x80 != 0 {
			if dist >= 1<<55 {
				return e, fmt.Errorf("%w: delta base distance overflows", ErrCorrupt)
			}
			if c, err = r.win.ReadByte(); err != nil {
				return e, readErr(err)
			}
			dist = (dist+1)<<7 | uint64(c&0x7f)
		}
		if dist == 0 || dist > uint64(off-12) {
			return e, fmt.Errorf("%w: delta base distance %d at offset %d", ErrCorrupt, dist, off)
		}
		e.basePack, e.baseOff = pi, off-int64(dist)
	case TypeRefDelta:
		var bh plumbing.Hash
		if _, err := io.ReadFull(&r.win, bh[:]); err != nil {
			return e, readErr(err)
		}
		if !resolveRef {
			break
		}
		bp, boff, ok, err := r.p.find(&bh, pi)
		if err != nil {
			return e, err
		}
		if !ok {
			return e, fmt.Errorf("%w: delta base %s not in any pack", ErrCorrupt, bh)
		}
		if bp == pi && boff == off {
			return e, chainLimit("an object is its own delta base (a cycle)")
		}
		e.basePack, e.baseOff = bp, boff
	default:
		return e, fmt.Errorf("%w: entry type %d", ErrCorrupt, e.typ)
	}
	e.data = r.win.pos()
	if size > maxObjectBytes || size > uint64(p.end-e.data)*maxDeflateRatio+1024 {
		return e, fmt.Errorf("%w: entry of %d bytes in %d bytes of pack", ErrCorrupt, size, p.end-e.data)
	}
	if e.isDelta() && size > uint64(r.p.lim.MaxObjectBytes) {
		return e, objectLimit("delta of %d bytes", size)
	}
	e.size = int64(size)
	return e, nil
}

// readErr turns the end of a pack's data within an entry into a format
// error.

// deltaTargetSize inflates the first bytes of delta entry e, enough for
// the sizes at the start of the delta, and returns the target size.
func (r *PackReader) deltaTargetSize(e *chainEntry) (int64, error) {
	if err := r.startInflate(e.pack, e.data); err != nil {
		return 0, err
	}
	n, err := io.ReadFull(r.fl, r.hdr[:20]) // two varints of up to 10 bytes
	r.stats.inflated += int64(n)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return 0, inflateErr(err)
	}
	if int64(n) > e.size {
		return 0, fmt.Errorf("%w: delta data longer than its header says", ErrCorrupt)
	}
	_, tgt, _, err := DeltaSizes(r.hdr[:n])
	if err != nil {
		return 0, err
	}
	if tgt > uint64(r.p.lim.MaxObjectBytes) {
		// Refused on its header alone: resolving it would hold it.
		return 0, objectLimit("delta target of %d bytes", tgt)
	}
	return int64(tgt), nil
}

// checkDeclared checks, before a chain is resolved, what it declares
// (its base's size, with whole, and the target size in each delta's
// header) against what is left of the Packs' budget: a chain that would
// run it out is refused before anything of it is allocated or computed,
// rather than after its levels were (issue 31: a chain of four levels of
// 239 MiB cost 478 MiB and seconds). The headers are read only when the
// chain could run it out at all (each level is at most MaxObjectBytes):
// honest chains in any but the smallest packs are far from it.
func (r *PackReader) checkDeclared(whole bool) error {
	if r.p.budget <= 0 {
		return nil
	}
	left := r.p.budget - r.p.resolved.Load() - r.spent
	if int64(len(r.chain)) <= left/r.p.lim.MaxObjectBytes {
		return nil
	}
	var declared int64
	if top := &r.chain[len(r.chain)-1]; whole && !top.isDelta() {
		declared = top.size
	}
	for i := range r.chain {
		e := &r.chain[i]
		if !e.isDelta() {
			continue
		}
		n, err := r.deltaTargetSize(e)
		if err != nil {
			return err
		}
		if declared += n; declared > left {
			return &LimitError{What: "inflated size", Detail: fmt.Sprintf(
				"a delta chain of %d levels declares more than the %d bytes left of what packs of %d bytes may resolve", len(r.chain), left, r.p.packBytes())}
		}
	}
	return nil
}

// admit is called before an object of n bytes is held in memory (inflated,
// or the target of a delta): over Limits.MaxObjectBytes it is an error;
// over gateBytes the read waits for bigGate. It charges the Packs' budget
// with what the reader resolved.
func (r *PackReader) admit(n int64) error {
	if n > r.p.lim.MaxObjectBytes {
		return objectLimit("object of %d bytes", n)
	}
	if n > progressBytes {
		r.p.progressed()
	}
	if r.spent += n; r.spent >= budgetChunk {
		if err := r.p.charge(r.spent); err != nil {
			return err
		}
		r.spent = 0
	}
	r.gate.admit(n, nil)
	return nil
}

// admitTarget admits the target of delta (its size from its header).
func (r *PackReader) admitTarget(delta []byte) error {
	_, tgt, _, err := DeltaSizes(delta)
	if err != nil {
		return err
	}
	if tgt > uint64(r.p.lim.MaxObjectBytes) {
		return objectLimit("delta target of %d bytes", tgt)
	}
	return r.admit(int64(tgt))
}

// startInflate positions the reader at the zlib stream at pack pi's offset
// off: it checks the 2-byte zlib header and resets the inflater on the
// Deflate data that follows.
func (r *PackReader) startInflate(pi int, off int64) error {
	p := r.p.packs[pi]
	r.syncWin()
	r.win.seek(p.f, p, p.end, off)
	return r.startZlib()
}

// startZlib checks a zlib header (RFC 1950) at the window's position and
// resets the inflater on the Deflate data that follows. (compress/zlib's
// reader would do the same, but allocates a checksum state on every Reset;
// the Adler-32 trailer is checked by finishZlib instead.)
func (r *PackReader) startZlib() error {
	if _, err := io.ReadFull(&r.win, r.hdr[:2]); err != nil {
		return readErr(err)
	}
	cmf, flg := r.hdr[0], r.hdr[1]
	if cmf&0x0f != 8 || cmf>>4 > 7 || (uint16(cmf)<<8|uint16(flg))%31 != 0 || flg&0x20 != 0 {
		return fmt.Errorf("%w: bad zlib header", ErrCorrupt)
	}
	if r.win.mapped != nil {
		// The inflater reads no byte past its stream from a
		// *bytes.Reader either (it is an io.ByteReader).
		r.mem.Reset(r.win.buf[r.win.r:r.win.w])
		r.onMem = true
		return r.fl.(flate.Resetter).Reset(&r.mem, nil)
	}
	return r.fl.(flate.Resetter).Reset(&r.win, nil)
}

// syncWin moves the window past what the inflater read from mem, if it
// read mem: before the window is read or moved again.
func (r *PackReader) syncWin() {
	if r.onMem {
		r.win.r = r.win.w - r.mem.Len()
		r.onMem = false
	}
}

// inflate inflates entry e into dst (grown as needed) and returns it.
func (r *PackReader) inflate(e *chainEntry, dst []byte) ([]byte, error) {
	if err := r.startInflate(e.pack, e.data); err != nil {
		return nil, err
	}
	out, err := r.inflateBody(dst, nil, e.size)
	if err != nil {
		return nil, err
	}
	return out, r.finishZlib(adler32.Checksum(out))
}

// inflateBody returns size bytes: head, then the rest inflated. The memory
// is dst's when large enough; else it is allocated at once up to
// preallocBytes, and beyond that as the data actually inflates. The stream
// must end there.
func (r *PackReader) inflateBody(dst, head []byte, size int64) ([]byte, error) {
	if size > int64(maxInt) || size < int64(len(head)) {
		return nil, fmt.Errorf("%w: object of %d bytes", ErrCorrupt, size)
	}
	n := int(size)
	var out []byte
	if cap(dst) >= n || n <= preallocBytes {
		out = Sized(dst, n)
		copy(out, head)
		// In spans of progressBytes, each a sign of life (OnProgress).
		for from := len(head); from < n; from += progressBytes {
			if from > len(head) {
				r.p.progressed()
			}
			if _, err := io.ReadFull(r.fl, out[from:min(n, from+progressBytes)]); err != nil {
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					return nil, fmt.Errorf("%w: object inflates to less than its header's %d bytes", ErrCorrupt, n)
				}
				return nil, inflateErr(err)
			}
		}
	} else {
		out = make([]byte, len(head), max(len(head), preallocBytes, 4096))
		copy(out, head)
		next := progressBytes
		for len(out) < n {
			if len(out) == cap(out) {
				grown := make([]byte, len(out), min(n, 2*cap(out)))
				copy(grown, out)
				out = grown
			}
			if len(out) >= next {
				r.p.progressed()
				next = len(out) + progressBytes
			}
			m, err := r.fl.Read(out[len(out):cap(out)])
			out = out[:len(out)+m]
			if err == io.EOF && len(out) < n {
				return nil, fmt.Errorf("%w: object inflates to %d bytes, its header says %d", ErrCorrupt, len(out), n)
			}
			if err != nil && err != io.EOF {
				return nil, inflateErr(err)
			}
		}
	}
	r.stats.inflated += size - int64(len(head))
	// The stream must end here.
	for i := 0; ; i++ {
		m, err := r.fl.Read(r.hdr[:1])
		if m > 0 {
			return nil, fmt.Errorf("%w: object inflates to more than its header's %d bytes", ErrCorrupt, n)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, inflateErr(err)
		}
		if i == 8 {
			return nil, fmt.Errorf("%w: inflater makes no progress", ErrCorrupt)
		}
	}
}

// finishZlib reads the Adler-32 trailer of the zlib stream just inflated
// and checks it against sum, the checksum of what inflated.
func (r *PackReader) finishZlib(sum uint32) error {
	r.syncWin()
	if _, err := io.ReadFull(&r.win, r.hdr[:4]); err != nil {
		return readErr(err)
	}
	if binary.BigEndian.Uint32(r.hdr[:4]) != sum {
		return fmt.Errorf("%w: zlib checksum mismatch", ErrCorrupt)
	}
	return nil
}

// trim drops scratch buffers grown for a big object.
func (r *PackReader) trim() {
	if cap(r.delta) > keepScratchBytes {
		r.delta = nil
	}
	if cap(r.tdelta) > keepScratchBytes {
		r.tdelta = nil
	}
	if cap(r.chain) > 1024 {
		r.chain = nil
	}
	for i := range r.tmp {
		if cap(r.tmp[i]) > keepScratchBytes {
			r.tmp[i] = nil
		}
	}
}

// readLoose reads object h from its loose object file (zlib data of
// "<type> <size>\x00" and the content), as readPacked reads a packed one;
// with readSize, only its header.
func (r *PackReader) readLoose(h plumbing.Hash, mode readMode, limit int64, buf []byte) (int, []byte, int64, error) {
	what := "object"
	if mode == readBlobOnly {
		what = "blob"
	}
	if r.p.root == nil {
		return 0, nil, 0, fmt.Errorf("%s %s: %w", what, h, plumbing.ErrObjectNotFound)
	}
	hex := h.String()
	f, _, err := openFile(r.p.root, hex[:2]+"/"+hex[2:])
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil, 0, fmt.Errorf("%s %s: %w", what, h, plumbing.ErrObjectNotFound)
		}
		return 0, nil, 0, fmt.Errorf("%s %s: %w", what, h, err)
	}
	defer f.Close()
	r.stats.loose++
	typ, data, size, err := r.readLooseFile(f, mode, limit, buf)
	r.win.f = nil // f's address may be reused by another file: forget the window
	r.win.w = 0
	switch {
	case err == nil:
		return typ, data, size, nil
	case errors.Is(err, ErrTooLarge):
		return typ, nil, size, fmt.Errorf("%s %s: %d bytes: %w", what, h, size, ErrTooLarge)
	default:
		return 0, nil, 0, fmt.Errorf("%s %s: loose object: %w", what, h, err)
	}
}

// Loose object type names, by pack entry type.
var looseTypes = [...]string{TypeCommit: "commit", TypeTree: "tree", TypeBlob: "blob", TypeTag: "tag"}

func (r *PackReader) readLooseFile(f *os.File, mode readMode, limit int64, buf []byte) (int, []byte, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, 0, err
	}
	r.syncWin()
	r.win.seek(f, nil, fi.Size(), 0)
	if err := r.startZlib(); err != nil {
		return 0, nil, 0, err
	}
	n, err := io.ReadFull(r.fl, r.hdr[:])
	r.stats.inflated += int64(n)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return 0, nil, 0, inflateErr(err)
	}
	hdr := r.hdr[:n]
	nul := -1
	for i, c := range hdr {
		if c == 0 {
			nul = i
			break
		}
	}
	if nul < 0 {
		return 0, nil, 0, fmt.Errorf("%w: bad loose object header", ErrCorrupt)
	}
	var typName string
	var sizeField []byte
	for i, c := range hdr[:nul] {
		if c == ' ' {
			typName, sizeField = string(hdr[:i]), hdr[i+1:nul]
			break
		}
	}
	if typName == "" || len(sizeField) == 0 {
		return 0, nil, 0, fmt.Errorf("%w: bad loose object header", ErrCorrupt)
	}
	var size uint64
	for _, c := range sizeField {
		if c < '0' || c > '9' || size > maxObjectBytes {
			return 0, nil, 0, fmt.Errorf("%w: bad loose object size", ErrCorrupt)
		}
		size = size*10 + uint64(c-'0')
	}
	if size > maxObjectBytes || size > uint64(fi.Size())*maxDeflateRatio+1024 {
		return 0, nil, 0, fmt.Errorf("%w: loose object of %d bytes in a %d-byte file", ErrCorrupt, size, fi.Size())
	}
	typ := 0
	for t, name := range looseTypes {
		if name != "" && name == typName {
			typ = t
		}
	}
	switch {
	case typ == 0:
		return 0, nil, 0, fmt.Errorf("%w: loose object type %q", ErrCorrupt, typName)
	case mode == readBlobOnly && typ != TypeBlob:
		return 0, nil, 0, fmt.Errorf("%s: %w", typName, errNotBlob)
	case mode == readSize || mode == readNotBlob && typ == TypeBlob:
		return typ, nil, int64(size), nil
	case limit > 0 && int64(size) > limit:
		return typ, nil, int64(size), ErrTooLarge
	}
	// Part of the content came with the header.
	head := hdr[nul+1:]
	if uint64(len(head)) > size {
		return 0, nil, 0, fmt.Errorf("%w: loose object longer than its header says", ErrCorrupt)
	}
	if err := r.admit(int64(size)); err != nil {
		return 0, nil, 0, err
	}
	sum := adler32.New()
	sum.Write(hdr[:nul+1])
	out, err := r.inflateBody(buf, head, int64(size))
	if err != nil {
		return 0, nil, 0, err
	}
	sum.Write(out)
	if err := r.finishZlib(sum.Sum32()); err != nil {
		return 0, nil, 0, err
	}
	return typ, out, int64(size), nil
}

// packWindow is a read-ahead window over a file read with ReadAt (so any
// number of windows can read one *os.File at once), which can seek within
// what it holds; or, over a pack mapped in memory, a view of the mapping,
// read in place. It is the flate.Reader (io.Reader and io.ByteReader) the
// inflater reads from: the inflater then reads no byte past its stream.
type packWindow struct {
	f     *os.File
	end   int64 // no reading at or past end
	buf   []byte
	own   []byte // the window's memory (buf, unless mapped)
	start int64  // file offset of buf[0]
	// seeked is the offset of the last seek out of the window: the first
	// fill there reads firstFillBytes, the next ones the whole window.
	seeked int64
	r, w   int // buf[r:w] is unread
	// mapped is the pack mapped in memory the window is over (nil: none),
	// mark where the last seek landed: what is read is accounted to acct
	// (see pageBudget).
	mapped *pack
	mark   int
	acct   *Packs
}

// seek positions the window at offset off of f, of which end bytes are
// readable; p, when its data is not nil, is f's pack mapped in memory (up
// to end).
func (w *packWindow) seek(f *os.File, p *pack, end, off int64) {
	if p != nil && p.data != nil {
		w.account()
		w.f, w.end, w.buf, w.start, w.r, w.w, w.seeked = f, end, p.data[:end], 0, int(off), int(end), -1
		w.mapped, w.mark = p, int(off)
		return
	}
	if w.mapped != nil {
		w.account()
		w.mapped, w.buf, w.f = nil, w.own, nil
	}
	if f == w.f && end == w.end && off >= w.start && off <= w.start+int64(w.w) {
		w.r = int(off - w.start)
		return
	}
	w.f, w.end, w.start, w.r, w.w, w.seeked = f, end, off, 0, 0, off
}

// account counts what was read of a mapping since the last seek.
func (w *packWindow) account() {
	if w.mapped != nil && w.acct != nil {
		w.acct.touched(w.mapped, w.mark, w.r)
	}
}

// pos is the file offset of the next byte.
func (w *packWindow) pos() int64 { return w.start + int64(w.r) }

func (w *packWindow) fill() error {
	if w.mapped != nil {
		return io.EOF // the mapping ends at end
	}
	w.start += int64(w.w)
	w.r, w.w = 0, 0
	if w.start >= w.end {
		return io.EOF
	}
	n := len(w.buf)
	if w.start == w.seeked {
		n = min(n, firstFillBytes)
	}
	if rem := w.end - w.start; rem < int64(n) {
		n = int(rem)
	}
	m, err := w.f.ReadAt(w.buf[:n], w.start)
	if m > 0 {
		w.w = m
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF // the file is shorter than it was
	}
	return err
}

func (w *packWindow) ReadByte() (byte, error) {
	if w.r == w.w {
		if err := w.fill(); err != nil {
			return 0, err
		}
	}
	c := w.buf[w.r]
	w.r++
	return c, nil
}

func (w *packWindow) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if w.r == w.w {
		if err := w.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, w.buf[w.r:w.w])
	w.r += n
	return n, nil
}

// baseCache is a reader's cache of resolved delta bases, of any type (each
// slot holds its object's type: a delta, found by the offset of its base,
// has the base's type), keyed by pack and offset: direct-mapped slots,
// bounded by the memory the slots hold. Their
// capacities are rounded up to powers of two, so that memory is reused by
// the next object of a similar size: the slot's own, or that of the slot
// evicted to make room. Eviction is by the clock algorithm (an
// approximation of least recently used).
type baseCache struct {
	slots     []cacheSlot // allocated by the first add
	n         int         // number of slots
	used, max int
	hand      int
}

type cacheSlot struct {
	pack  int
	off   int64
	data  []byte // nil: no memory
	typ   uint8  // the object's type (TypeCommit, TypeTree, TypeBlob, TypeTag)
	valid bool
	ref   bool // used since the clock hand last passed
	read  bool // returned by a read (not only cached as a delta base)
}

func (c *baseCache) init(max, slots int) {
	c.max, c.n = max, slots
	c.slots = nil
	c.used, c.hand = 0, 0
}

// The cache is two-way set-associative: an object may be in either slot
// of its pair.
func (c *baseCache) pair(pack int, off int64) (*cacheSlot, *cacheSlot) {
	k := (uint64(off) ^ uint64(pack)<<56) * 0x9E3779B97F4A7C15
	i := k >> 32 & uint64(len(c.slots)-1)
	return &c.slots[i], &c.slots[i^1]
}

// slot returns the slot holding the object cached for pack and offset;
// nil if none.
func (c *baseCache) slot(pack int, off int64) *cacheSlot {
	a, b := c.pair(pack, off)
	switch {
	case a.valid && a.pack == pack && a.off == off:
		return a
	case b.valid && b.pack == pack && b.off == off:
		return b
	}
	return nil
}

// lookup returns the object cached for pack and offset, and its type; nil
// if none.
func (c *baseCache) lookup(pack int, off int64) ([]byte, int) {
	if c.slots == nil {
		return nil, 0
	}
	s := c.slot(pack, off)
	if s == nil {
		return nil, 0
	}
	s.ref = true
	return s.data, int(s.typ)
}

// add copies data, an object of type typ, into the cache. The memory it
// reuses may be that of earlier lookup results: they must not be used
// after.
func (c *baseCache) add(pack int, off int64, typ int, data []byte) {
	if len(data) > c.max/4 {
		return
	}
	if c.slots == nil {
		c.slots = make([]cacheSlot, c.n)
	}
	if c.slot(pack, off) != nil {
		return
	}
	// Of the pair, the slot unused, or else not used since the clock
	// hand last passed, or else the first.
	s, o := c.pair(pack, off)
	if s.valid && (!o.valid || s.ref && !o.ref) {
		s = o
	}
	s.valid = false
	if cap(s.data) < len(data) {
		c.used -= cap(s.data)
		s.data = nil
		need := 64
		for need < len(data) {
			need <<= 1
		}
		var mem []byte
		for c.used+need > c.max {
			v := c.victim()
			if v == nil {
				break
			}
			m := v.data
			c.used -= cap(m)
			v.data, v.valid = nil, false
			if mem == nil && cap(m) >= need && cap(m) <= 2*need {
				mem, need = m, cap(m)
			}
		}
		if mem == nil {
			mem = make([]byte, need)
		}
		s.data = mem
		c.used += cap(mem)
	}
	s.data = s.data[:len(data)]
	copy(s.data, data)
	s.pack, s.off, s.typ, s.valid, s.ref, s.read = pack, off, uint8(typ), true, true, false
}

// markRead records that the object cached for pack and offset was returned
// by a read, and reports whether it had been before.
func (c *baseCache) markRead(pack int, off int64) (before bool) {
	if c.slots == nil {
		return false
	}
	if s := c.slot(pack, off); s != nil {
		before, s.read = s.read, true
	}
	return before
}

// forget marks the object cached for pack and offset, if any, as no
// longer wanted: its memory is the first the cache reuses.
func (c *baseCache) forget(pack int, off int64) {
	if c.slots == nil {
		return
	}
	if s := c.slot(pack, off); s != nil {
		s.valid, s.ref = false, false
	}
}

// victim returns the next slot holding memory the clock hand finds unused
// since its last pass.
func (c *baseCache) victim() *cacheSlot {
	for i := 0; i < 2*len(c.slots); i++ {
		s := &c.slots[c.hand]
		c.hand = (c.hand + 1) & (len(c.slots) - 1)
		if s.data == nil {
			continue
		}
		if s.ref {
			s.ref = false
			continue
		}
		return s
	}
	return nil
}
