package gitread

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	gghash "github.com/go-git/go-git/v5/plumbing/hash"
)

// Index is what an Indexer learnt of a pack: the name, offset and CRC-32 of
// every object, enough to write the pack's .idx.
type Index struct {
	// Checksum is the pack's trailing checksum, which names its files
	// (pack-<Checksum>.pack and .idx).
	Checksum plumbing.Hash
	// Size is the size of the pack in bytes.
	Size int64
	// ThinBases is the number of objects appended to complete a thin pack.
	ThinBases int
	// Refused are the pack's entries left out of the index, in offset
	// order (see Refusal): write them beside the index (WriteRefusals)
	// before it, or OpenPacks refuses a pack holding more entries than
	// its index.
	Refused []Refusal

	entries []entry
}

// Objects is the number of objects in the pack.
func (ix *Index) Objects() int { return len(ix.entries) }

// WriteTo writes the version 2 index of the pack, byte for byte as `git
// index-pack` writes it:
//
//	magic "\377tOc", version 2
//	fan-out: 256 × uint32, the number of objects whose name's first byte is <= i
//	names: n × 20 bytes, sorted
//	CRC-32s of the entries' bytes: n × uint32
//	offsets: n × uint32; past 2^31-1 the MSB is set and the low 31 bits
//	         index the large offsets
//	large offsets: m × uint64
//	pack checksum, then the SHA-1 of all the above
func (ix *Index) WriteTo(w io.Writer) (int64, error) {
	es := ix.entries
	order := make([]int32, len(es))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := bytes.Compare(es[a].hash[:], es[b].hash[:]); c != 0 {
			return c
		}
		return cmpInt(es[a].off(), es[b].off())
	})
	sum := gghash.New(crypto.SHA1)
	cw := &countWriter{w: bufio.NewWriterSize(w, 64<<10)}
	// Write errors are kept in cw.err (the hash never fails) and returned
	// at the end, so the writes below need no checks of their own.
	out := io.MultiWriter(cw, sum)
	var b [8]byte
	u32 := func(v uint32) {
		binary.BigEndian.PutUint32(b[:4], v)
		_, _ = out.Write(b[:4])
	}
	_, _ = out.Write([]byte{0xff, 't', 'O', 'c'})
	u32(2)
	var fan [256]uint32
	for i := range es {
		fan[es[i].hash[0]]++
	}
	var total uint32
	for i := range fan {
		total += fan[i]
		u32(total)
	}
	for _, i := range order {
		_, _ = out.Write(es[i].hash[:])
	}
	for _, i := range order {
		u32(es[i].crc)
	}
	var large []int64
	for _, i := range order {
		off := es[i].off()
		if off > 0x7fffffff {
			u32(0x80000000 | uint32(len(large)))
			large = append(large, off)
		} else {
			u32(uint32(off))
		}
	}
	for _, off := range large {
		binary.BigEndian.PutUint64(b[:], uint64(off))
		_, _ = out.Write(b[:])
	}
	_, _ = out.Write(ix.Checksum[:])
	_, _ = cw.Write(sum.Sum(nil))
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return len(p), nil // errors are reported by WriteTo
}

// fixThin completes a thin pack as `git index-pack --fix-thin` does: the
// bases of unresolved REF_DELTAs that no object of the pack has are read
// with IndexOptions.Base and appended to the pack as whole objects; the pack's
// object count and checksum are rewritten. It returns the new entries that
// have deltas on them, and the error to report if deltas stay unresolved
// after those (a base that IndexOptions.Base does not have).
func (x *Indexer) fixThin(g *graph, ix *Index) ([]int32, error, error) {
	have := make(map[plumbing.Hash]bool, len(x.entries))
	for i := range x.entries {
		if x.entries[i].otyp != 0 {
			have[x.entries[i].hash] = true
		}
	}
	var missing []plumbing.Hash
	seen := map[plumbing.Hash]bool{}
	for _, r := range x.refs {
		if x.entries[r.idx].otyp == 0 && !have[r.base] && !seen[r.base] {
			seen[r.base] = true
			missing = append(missing, r.base)
		}
	}
	if len(missing) == 0 {
		return nil, nil, nil // a cycle: reported by the caller
	}
	if x.opts.Base == nil {
		return nil, nil, fmt.Errorf("%w: thin pack: delta base %s is not in the pack", ErrCorrupt, missing[0])
	}
	slices.SortFunc(missing, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })

	pos := x.end // the trailer's place
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	var roots []int32
	var notFound error
	for _, h := range missing {
		t, data, err := x.opts.Base(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			// Perhaps the name of a delta in the pack whose own base is
			// missing; reported below if it stays unresolved.
			if notFound == nil {
				notFound = fmt.Errorf("%w: thin pack: delta base %s not found", ErrCorrupt, h)
			}
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("thin pack base %s: %w", h, err)
		}
		typ := uint8(t)
		if typ < TypeCommit || typ > TypeTag {
			return nil, nil, fmt.Errorf("thin pack base %s: object type %v", h, t)
		}
		if got := x.h.object(typ, data); got != h {
			return nil, nil, fmt.Errorf("thin pack base %s: content hashes to %s", h, got)
		}
		buf.Reset()
		buf.Write(entryHeader(nil, typ, uint64(len(data))))
		zw.Reset(&buf)
		_, _ = zw.Write(data) // into memory; Close reports any error
		if err := zw.Close(); err != nil {
			return nil, nil, err
		}
		if _, err := x.f.WriteAt(buf.Bytes(), pos); err != nil {
			return nil, nil, fmt.Errorf("write pack: %w", err)
		}
		if len(x.entries) >= 1<<31-1 {
			return nil, nil, fmt.Errorf("%w: too many objects", ErrCorrupt)
		}
		if pos > maxEntryOffset {
			return nil, nil, fmt.Errorf("%w: pack larger than %d bytes", ErrCorrupt, int64(maxEntryOffset))
		}
		i := int32(len(x.entries))
		e := entry{base: -1, crc: crc32.ChecksumIEEE(buf.Bytes()), typ: typ, otyp: typ, hash: h}
		e.setOff(pos)
		x.entries = append(x.entries, e)
		roots = append(roots, i)
		pos += int64(buf.Len())
		ix.ThinBases++
	}
	if len(roots) == 0 {
		return nil, notFound, nil
	}
	count := uint64(x.count) + uint64(len(roots))
	if count > 1<<32-1 {
		return nil, nil, fmt.Errorf("%w: too many objects", ErrCorrupt)
	}
	x.count = uint32(count)
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], x.count)
	if _, err := x.f.WriteAt(c[:], 8); err != nil {
		return nil, nil, fmt.Errorf("write pack: %w", err)
	}
	sum := gghash.New(crypto.SHA1)
	if _, err := io.Copy(sum, io.NewSectionReader(x.f, 0, pos)); err != nil {
		return nil, nil, fmt.Errorf("read pack: %w", err)
	}
	copy(x.trailer[:], sum.Sum(nil))
	if _, err := x.f.WriteAt(x.trailer[:], pos); err != nil {
		return nil, nil, fmt.Errorf("write pack: %w", err)
	}
	if err := x.f.Truncate(pos + hashSize); err != nil {
		return nil, nil, fmt.Errorf("write pack: %w", err)
	}
	x.end = pos
	ix.Checksum, ix.Size = x.trailer, pos+hashSize

	// The graph grows with the new entries (no deltas on them by offset).
	n := len(x.entries)
	claimed := make([]atomic.Bool, n)
	for i := range g.claimed {
		claimed[i].Store(g.claimed[i].Load())
	}
	g.claimed = claimed
	last := g.ofsStart[len(g.ofsStart)-1]
	for len(g.ofsStart) < n+1 {
		g.ofsStart = append(g.ofsStart, last)
	}
	return roots, notFound, nil
}

// entryHeader appends the header of a whole object's entry.
func entryHeader(dst []byte, typ uint8, size uint64) []byte {
	c := typ<<4 | uint8(size&0x0f)
	size >>= 4
	for size != 0 {
		dst = append(dst, c|0x80)
		c = uint8(size & 0x7f)
		size >>= 7
	}
	return append(dst, c)
}
