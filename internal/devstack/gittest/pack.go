package gittest

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// Pack entry types (the 3 type bits of an entry header); 5 is reserved.
const (
	Commit   = 1
	Tree     = 2
	Blob     = 3
	Tag      = 4
	OfsDelta = 6
	RefDelta = 7
)

// Hash is the object name of content of type typ ("blob", "tree", …).
func Hash(typ string, content []byte) plumbing.Hash {
	s := sha1.New()
	fmt.Fprintf(s, "%s %d\x00", typ, len(content))
	s.Write(content)
	var h plumbing.Hash
	copy(h[:], s.Sum(nil))
	return h
}

// Pack builds a pack entry by entry, whatever the entries say.
type Pack struct {
	buf     bytes.Buffer
	entries []entry
	z       *zlib.Writer // reused: a new one allocates about 1 MB
}

type entry struct {
	h   plumbing.Hash
	off int64
}

// NewPack starts an empty version 2 pack.
func NewPack() *Pack {
	p := &Pack{}
	p.buf.WriteString("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	return p
}

// Count is the number of entries so far.
func (p *Pack) Count() int { return len(p.entries) }

// Len is the pack's length so far: the offset of the next entry.
func (p *Pack) Len() int64 { return int64(p.buf.Len()) }

// Entry appends an entry of type typ that declares size, with extra bytes
// after the header (a delta's base) and data, deflated. h is the object
// name the index will list (zero when no index is written). It returns the
// entry's offset.
func (p *Pack) Entry(h plumbing.Hash, typ int, size uint64, extra, data []byte) int64 {
	off := p.Len()
	c := byte(typ<<4) | byte(size&0x0f)
	for size >>= 4; size > 0; size >>= 7 {
		p.buf.WriteByte(c | 0x80)
		c = byte(size & 0x7f)
	}
	p.buf.WriteByte(c)
	p.buf.Write(extra)
	if p.z == nil {
		p.z = zlib.NewWriter(&p.buf)
	} else {
		p.z.Reset(&p.buf)
	}
	p.z.Write(data)
	p.z.Close()
	p.entries = append(p.entries, entry{h, off})
	return off
}

// Raw appends data as an entry as it is (a header cut short, say), listed
// in the index as h.
func (p *Pack) Raw(h plumbing.Hash, data []byte) int64 {
	off := p.Len()
	p.buf.Write(data)
	p.entries = append(p.entries, entry{h, off})
	return off
}

// Blob appends a whole blob.
func (p *Pack) Blob(content []byte) (plumbing.Hash, int64) {
	h := Hash("blob", content)
	return h, p.Entry(h, Blob, uint64(len(content)), nil, content)
}

// OfsDelta appends the delta of object h on the entry at base.
func (p *Pack) OfsDelta(h plumbing.Hash, base int64, delta []byte) int64 {
	return p.Entry(h, OfsDelta, uint64(len(delta)), OfsDistance(p.Len()-base), delta)
}

// RefDelta appends the delta of object h on the object named base.
func (p *Pack) RefDelta(h, base plumbing.Hash, delta []byte) int64 {
	return p.Entry(h, RefDelta, uint64(len(delta)), base[:], delta)
}

// OfsDistance encodes an OFS_DELTA's distance back to its base.
func OfsDistance(d int64) []byte {
	out := []byte{byte(d & 0x7f)}
	for d >>= 7; d > 0; d >>= 7 {
		d--
		out = append([]byte{byte(0x80 | d&0x7f)}, out...)
	}
	return out
}

// Bytes returns the pack with its object count and trailing checksum.
func (p *Pack) Bytes() []byte {
	b := append([]byte(nil), p.buf.Bytes()...)
	n := len(p.entries)
	b[8], b[9], b[10], b[11] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	sum := sha1.Sum(b)
	return append(b, sum[:]...)
}

// Write writes the pack as pack-<name>.pack, with a version 2 .idx beside
// it, into the objects/pack directory of the repository at dir. With
// largeOffsets every offset goes through the large offset table. CRC-32s
// are left zero: readers do not check them.
func (p *Pack) Write(t testing.TB, dir, name string, largeOffsets bool) {
	t.Helper()
	if err := p.WriteFiles(dir, name, largeOffsets); err != nil {
		t.Fatal(err)
	}
}

// WriteFiles is Write, returning its error.
func (p *Pack) WriteFiles(dir, name string, largeOffsets bool) error {
	pack := p.Bytes()
	ents := append([]entry(nil), p.entries...)
	sort.Slice(ents, func(i, j int) bool { return bytes.Compare(ents[i].h[:], ents[j].h[:]) < 0 })
	var idx bytes.Buffer
	be32 := func(v uint32) { idx.Write([]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}) }
	idx.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	for i := 0; i < 256; i++ {
		n := sort.Search(len(ents), func(k int) bool { return int(ents[k].h[0]) > i })
		be32(uint32(n))
	}
	for _, e := range ents {
		idx.Write(e.h[:])
	}
	idx.Write(make([]byte, 4*len(ents)))
	for i, e := range ents {
		if largeOffsets {
			be32(0x80000000 | uint32(i))
		} else {
			be32(uint32(e.off))
		}
	}
	if largeOffsets {
		for _, e := range ents {
			be32(uint32(uint64(e.off) >> 32))
			be32(uint32(e.off))
		}
	}
	idx.Write(pack[len(pack)-sha1.Size:])
	isum := sha1.Sum(idx.Bytes())
	idx.Write(isum[:])

	pd := filepath.Join(dir, "objects", "pack")
	if err := os.MkdirAll(pd, 0o755); err != nil {
		return err
	}
	for ext, data := range map[string][]byte{".pack": pack, ".idx": idx.Bytes()} {
		if err := os.WriteFile(filepath.Join(pd, "pack-"+name+ext), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Delta builds delta data: NewDelta(src, tgt).Insert(…).Copy(…).
type Delta []byte

// NewDelta starts a delta from a base of src bytes to a target of tgt.
func NewDelta(src, tgt int) Delta {
	return Delta(nil).varint(uint64(src)).varint(uint64(tgt))
}

// Extend is a delta that copies all of a base of src bytes and appends add.
func Extend(src int, add string) Delta {
	d := NewDelta(src, src+len(add))
	for off := 0; off < src; off += 0x10000 {
		d = d.Copy(off, min(0x10000, src-off))
	}
	return d.Insert([]byte(add))
}

func (d Delta) varint(v uint64) Delta {
	for v >= 0x80 {
		d = append(d, byte(v)|0x80)
		v >>= 7
	}
	return append(d, byte(v))
}

// Copy appends a copy of size bytes at off in the base (a size of 0x10000
// is encoded as none, as git does).
func (d Delta) Copy(off, size int) Delta {
	cmd := byte(0x80)
	var args []byte
	for i := 0; i < 4; i++ {
		if b := byte(off >> (8 * i)); b != 0 {
			cmd |= 1 << i
			args = append(args, b)
		}
	}
	if size != 0x10000 {
		for i := 0; i < 3; i++ {
			if b := byte(size >> (8 * i)); b != 0 {
				cmd |= 1 << (4 + i)
				args = append(args, b)
			}
		}
	}
	return append(append(d, cmd), args...)
}

// Insert appends data, in inserts of at most 127 bytes.
func (d Delta) Insert(data []byte) Delta {
	for len(data) > 0 {
		n := min(len(data), 127)
		d = append(append(d, byte(n)), data[:n]...)
		data = data[n:]
	}
	return d
}
