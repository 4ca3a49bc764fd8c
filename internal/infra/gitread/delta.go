package gitread

import (
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
)

// Git's delta format (the data of an OFS_DELTA or REF_DELTA pack entry):
//
//	source size, target size: little-endian base-128 varints
//	instructions, until the end of the data:
//	  1xxxxxxx: copy from the source. Bits 0-3 say which of the 4 bytes of
//	            the offset follow, bits 4-6 which of the 3 bytes of the size
//	            (little-endian, absent bytes are 0); size 0 means 0x10000.
//	  0nnnnnnn: insert the n (1 to 127) bytes that follow.
//	  00000000: reserved, an error.

// DeltaSizes parses the source and target sizes at the start of delta and
// returns them with the length of the header.
func DeltaSizes(delta []byte) (src, tgt uint64, n int, err error) {
	src, n, err = deltaVarint(delta, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	tgt, n, err = deltaVarint(delta, n)
	return src, tgt, n, err
}

func deltaVarint(b []byte, i int) (uint64, int, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if i >= len(b) {
			return 0, 0, fmt.Errorf("%w: truncated delta header", ErrCorrupt)
		}
		if shift > 63 {
			return 0, 0, fmt.Errorf("%w: delta size overflows", ErrCorrupt)
		}
		c := b[i]
		i++
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, i, nil
		}
	}
}

// deltaOp decodes the instruction at delta[i]: a copy of base[off:off+size]
// (insert false) or an insert of delta[off:off+size] (insert true), and the
// index of the next instruction. It checks the instruction against the
// lengths of delta and of a base of baseLen bytes.
func deltaOp(delta []byte, i int, baseLen uint64) (off, size uint64, insert bool, next int, err error) {
	c := delta[i]
	i++
	switch {
	case c&0x80 != 0:
		for bit := uint(0); bit < 7; bit++ {
			if c&(1<<bit) == 0 {
				continue
			}
			if i >= len(delta) {
				return 0, 0, false, 0, fmt.Errorf("%w: truncated delta copy", ErrCorrupt)
			}
			if bit < 4 {
				off |= uint64(delta[i]) << (8 * bit)
			} else {
				size |= uint64(delta[i]) << (8 * (bit - 4))
			}
			i++
		}
		if size == 0 {
			size = 0x10000
		}
		// off < 2^32 and size <= 2^24: the sum cannot overflow.
		if off+size > baseLen {
			return 0, 0, false, 0, fmt.Errorf("%w: delta copies [%d,%d) of a %d-byte base", ErrCorrupt, off, off+size, baseLen)
		}
		return off, size, false, i, nil
	case c != 0:
		size = uint64(c)
		if uint64(len(delta)-i) < size {
			return 0, 0, false, 0, fmt.Errorf("%w: truncated delta insert", ErrCorrupt)
		}
		return uint64(i), size, true, i + int(c), nil
	default:
		return 0, 0, false, 0, fmt.Errorf("%w: reserved delta instruction", ErrCorrupt)
	}
}

// ApplyDelta applies delta to base and returns the target, in dst's memory
// when it is large enough. The delta is checked in full before anything is
// allocated or written: the source size must be len(base), every copy must
// be inside base, and the instructions must produce exactly the target size
// of the header, so a corrupt delta costs no allocation. Errors wrap
// ErrCorrupt.
func ApplyDelta(dst, base, delta []byte) ([]byte, error) {
	tgt, start, err := checkDelta(base, delta)
	if err != nil {
		return nil, err
	}
	baseLen := uint64(len(base))
	out := Sized(dst, int(tgt))
	w := 0
	for i := start; i < len(delta); {
		off, size, insert, next, _ := deltaOp(delta, i, baseLen) // checked above
		if insert {
			w += copy(out[w:], delta[off:off+size])
		} else {
			w += copy(out[w:], base[off:off+size])
		}
		i = next
	}
	return out, nil
}

// checkDelta checks delta against base as ApplyDelta does, and returns its
// target size and where its instructions start.
func checkDelta(base, delta []byte) (uint64, int, error) {
	src, tgt, start, err := DeltaSizes(delta)
	if err != nil {
		return 0, 0, err
	}
	baseLen := uint64(len(base))
	if src != baseLen {
		return 0, 0, fmt.Errorf("%w: delta for a %d-byte base applied to %d bytes", ErrCorrupt, src, baseLen)
	}
	var total uint64
	for i := start; i < len(delta); {
		_, size, _, next, err := deltaOp(delta, i, baseLen)
		if err != nil {
			return 0, 0, err
		}
		if total += size; total > tgt {
			return 0, 0, fmt.Errorf("%w: delta writes more than its %d-byte target", ErrCorrupt, tgt)
		}
		i = next
	}
	if total != tgt {
		return 0, 0, fmt.Errorf("%w: delta writes %d bytes of its %d-byte target", ErrCorrupt, total, tgt)
	}
	if tgt > uint64(maxInt) {
		return 0, 0, fmt.Errorf("%w: delta target of %d bytes", ErrCorrupt, tgt)
	}
	return tgt, start, nil
}

// hashDelta names the target of delta applied to base, an object of type
// typ, without making it: the pieces the instructions copy and insert go
// straight to the hash. The delta is checked as ApplyDelta checks it.
func hashDelta(h *hasher, typ uint8, base, delta []byte) (plumbing.Hash, error) {
	tgt, start, err := checkDelta(base, delta)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	baseLen := uint64(len(base))
	h.begin(typ, int64(tgt))
	for i := start; i < len(delta); {
		off, size, insert, next, _ := deltaOp(delta, i, baseLen) // checked above
		if insert {
			h.h.Write(delta[off : off+size])
		} else {
			h.h.Write(base[off : off+size])
		}
		i = next
	}
	return h.end(), nil
}

const maxInt = int(^uint(0) >> 1)

// Sized returns buf[:n] if buf has the capacity, else a new slice of n bytes.
func Sized(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]byte, n)
}
