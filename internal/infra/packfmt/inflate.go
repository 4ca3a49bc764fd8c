package packfmt

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
)

// A Deflate decoder (RFC 1951) for pack entries, whose inflated size is in
// their header: it decodes straight into an output buffer of that size
// (back-references copy within it, so no window is kept), reading its
// input from a byte buffer 64 bits at a time through table lookups. It is
// several times faster than compress/flate for the many small streams of a
// pack. Data that is not valid Deflate, or that inflates to more or less
// than the output buffer, is an error wrapping ErrCorrupt.

// inBuf is the input of the inflater: buf[r:w] is unread. more makes more
// bytes available (it may move them within buf, adjusting r and w, but
// keeps at least the 8 bytes before r) and returns io.EOF at the end of
// the input.
type inBuf struct {
	buf  []byte
	r, w int
	more func() error
}

func noMore() error { return io.EOF }

// Huffman tables. An entry is sym<<16 | len for a code of len bits, or
// sub<<16 | subFlag | bits<<8 for a pointer to a subtable of 1<<bits
// entries at tab[sub:], indexed by the bits after the first pbits. 0 is an
// invalid code.
const subFlag = 0x8000

type huffTable struct {
	tab   []uint32
	pbits uint
	mask  uint64
}

const (
	litPrimaryBits  = 10
	distPrimaryBits = 8
	maxCodeLen      = 15
)

// build builds the table of the canonical Huffman code of lengths (0: not
// used). An over-subscribed code is an error; an incomplete one leaves
// invalid entries.
func (t *huffTable) build(lengths []uint8, primary uint) error {
	var count [maxCodeLen + 1]int
	maxLen := 0
	for _, l := range lengths {
		count[l]++
		if int(l) > maxLen {
			maxLen = int(l)
		}
	}
	count[0] = 0
	left := 1
	for l := 1; l <= maxCodeLen; l++ {
		left <<= 1
		left -= count[l]
		if left < 0 {
			return fmt.Errorf("%w: over-subscribed Huffman code", ErrCorrupt)
		}
	}
	pbits := primary
	if maxLen < int(pbits) {
		pbits = uint(max(maxLen, 1))
	}
	t.pbits, t.mask = pbits, 1<<pbits-1
	size := 1 << pbits
	// First code of each length (canonical order).
	var next [maxCodeLen + 2]int
	code := 0
	for l := 1; l <= maxCodeLen; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	// Subtables: one per primary slot that long codes start with.
	subBits := 0
	if maxLen > int(pbits) {
		subBits = maxLen - int(pbits)
	}
	nsub := 0
	if subBits > 0 {
		// Count the distinct prefixes of the long codes.
		for l := int(pbits) + 1; l <= maxLen; l++ {
			nsub += count[l]
		}
	}
	total := size + nsub<<subBits
	if cap(t.tab) < total {
		t.tab = make([]uint32, total)
	} else {
		t.tab = t.tab[:total]
		clear(t.tab)
	}
	usedSub := size
	for sym, l := range lengths {
		if l == 0 {
			continue
		}
		c := next[l]
		next[l]++
		r := reverse(uint(c), uint(l))
		if uint(l) <= pbits {
			e := uint32(sym)<<16 | uint32(l)
			for i := r; i < uint(size); i += 1 << l {
				t.tab[i] = e
			}
			continue
		}
		slot := r & uint(t.mask)
		p := t.tab[slot]
		if p == 0 {
			p = uint32(usedSub)<<16 | subFlag | uint32(subBits)<<8
			t.tab[slot] = p
			usedSub += 1 << subBits
		}
		base := uint(p >> 16)
		e := uint32(sym)<<16 | uint32(l)
		for i := r >> pbits; i < 1<<subBits; i += 1 << (uint(l) - pbits) {
			t.tab[base+i] = e
		}
	}
	return nil
}

func reverse(c, n uint) uint { return uint(bits.Reverse16(uint16(c))) >> (16 - n) }

var lengthBase = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
	35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
var lengthExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
	3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
var distBase = [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
	257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
var distExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
	7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}

var codeLenOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

var fixedLit, fixedDist huffTable

func init() {
	var l [288]uint8
	for i := range l {
		switch {
		case i < 144:
			l[i] = 8
		case i < 256:
			l[i] = 9
		case i < 280:
			l[i] = 7
		default:
			l[i] = 8
		}
	}
	if err := fixedLit.build(l[:], litPrimaryBits); err != nil {
		panic(err)
	}
	var d [30]uint8
	for i := range d {
		d[i] = 5
	}
	if err := fixedDist.build(d[:], distPrimaryBits); err != nil {
		panic(err)
	}
}

// inflater decodes Deflate streams; its tables are reused.
type inflater struct {
	in   *inBuf
	bits uint64
	nb   uint
	pad  int // zero bytes read past the end of the input
	lit  huffTable
	dist huffTable
	cl   huffTable
	lens [288 + 32]uint8
}

var errTruncated = fmt.Errorf("%w: deflate data truncated", ErrCorrupt)

// refill makes at least 56 bits available (past the input's end they are
// zeros, counted in pad).
func (f *inflater) refill() error {
	in := f.in
	if in.w-in.r >= 8 {
		f.bits |= binary.LittleEndian.Uint64(in.buf[in.r:]) << f.nb
		in.r += int(63-f.nb) >> 3
		f.nb |= 56
		return nil
	}
	for f.nb <= 56 {
		if in.r == in.w {
			if f.pad == 0 {
				err := in.more()
				if err == nil {
					if in.w-in.r >= 8 {
						return f.refill()
					}
					continue
				}
				if err != io.EOF {
					return err
				}
			}
			if f.pad >= 16 {
				return errTruncated
			}
			f.pad++
			f.nb += 8
			continue
		}
		f.bits |= uint64(in.buf[in.r]) << f.nb
		in.r++
		f.nb += 8
	}
	return nil
}

// need makes n (at most 56) bits available.
func (f *inflater) need(n uint) error {
	if f.nb >= n {
		return nil
	}
	return f.refill()
}

func (f *inflater) take(n uint) uint64 {
	v := f.bits & (1<<n - 1)
	f.bits >>= n
	f.nb -= n
	return v
}

// sym decodes a symbol; at least 15 bits must be available.
func (f *inflater) sym(t *huffTable) (int, error) {
	e := t.tab[f.bits&t.mask]
	if e&subFlag != 0 {
		e = t.tab[uint(e>>16)+uint((f.bits>>t.pbits)&(1<<((e>>8)&0xf)-1))]
	}
	n := uint(e & 0xff)
	if n == 0 || n > f.nb {
		return 0, fmt.Errorf("%w: invalid Huffman code", ErrCorrupt)
	}
	f.bits >>= n
	f.nb -= n
	return int(e >> 16), nil
}

// unread gives the whole bytes left in the bit buffer back to the input.
func (f *inflater) unread() error {
	n := int(f.nb >> 3)
	if n < f.pad {
		return errTruncated
	}
	f.in.r -= n - f.pad
	f.bits, f.nb, f.pad = 0, 0, 0
	return nil
}

// inflate decodes one Deflate stream from in into out, which it must fill
// exactly, and leaves in just past the stream.
func (f *inflater) inflate(in *inBuf, out []byte) error {
	f.in, f.bits, f.nb, f.pad = in, 0, 0, 0
	pos := 0
	for {
		if err := f.need(3); err != nil {
			return err
		}
		final := f.take(1)
		var err error
		switch f.take(2) {
		case 0:
			pos, err = f.stored(out, pos)
		case 1:
			pos, err = f.codes(out, pos, &fixedLit, &fixedDist)
		case 2:
			if err = f.dynamic(); err == nil {
				pos, err = f.codes(out, pos, &f.lit, &f.dist)
			}
		default:
			err = fmt.Errorf("%w: invalid deflate block type", ErrCorrupt)
		}
		if err != nil {
			return err
		}
		if final == 1 {
			break
		}
	}
	if err := f.unread(); err != nil {
		return err
	}
	if pos != len(out) {
		return fmt.Errorf("%w: data inflates to %d bytes, its header says %d", ErrCorrupt, pos, len(out))
	}
	return nil
}

func (f *inflater) stored(out []byte, pos int) (int, error) {
	f.take(f.nb & 7)
	if err := f.need(32); err != nil {
		return 0, err
	}
	n := int(f.take(16))
	if int(f.take(16)) != n^0xffff {
		return 0, fmt.Errorf("%w: stored block length mismatch", ErrCorrupt)
	}
	if err := f.unread(); err != nil {
		return 0, err
	}
	if n > len(out)-pos {
		return 0, fmt.Errorf("%w: data inflates to more than its header says", ErrCorrupt)
	}
	in := f.in
	for n > 0 {
		if in.r == in.w {
			if err := in.more(); err != nil {
				if err == io.EOF {
					return 0, errTruncated
				}
				return 0, err
			}
			continue
		}
		m := copy(out[pos:pos+n], in.buf[in.r:in.w])
		in.r += m
		pos += m
		n -= m
	}
	return pos, nil
}

func (f *inflater) dynamic() error {
	if err := f.need(14); err != nil {
		return err
	}
	nlit := int(f.take(5)) + 257
	ndist := int(f.take(5)) + 1
	ncl := int(f.take(4)) + 4
	if nlit > 286 || ndist > 30 {
		return fmt.Errorf("%w: too many Huffman codes", ErrCorrupt)
	}
	var cl [19]uint8
	for i := 0; i < ncl; i++ {
		if err := f.need(3); err != nil {
			return err
		}
		cl[codeLenOrder[i]] = uint8(f.take(3))
	}
	if err := f.cl.build(cl[:], 7); err != nil {
		return err
	}
	lens := f.lens[:nlit+ndist]
	for i := 0; i < len(lens); {
		if err := f.need(maxCodeLen + 7); err != nil {
			return err
		}
		s, err := f.sym(&f.cl)
		if err != nil {
			return err
		}
		if s < 16 {
			lens[i] = uint8(s)
			i++
			continue
		}
		var rep int
		var v uint8
		switch s {
		case 16:
			if i == 0 {
				return fmt.Errorf("%w: repeated code length with no previous one", ErrCorrupt)
			}
			rep, v = 3+int(f.take(2)), lens[i-1]
		case 17:
			rep = 3 + int(f.take(3))
		default:
			rep = 11 + int(f.take(7))
		}
		if i+rep > len(lens) {
			return fmt.Errorf("%w: code lengths overflow", ErrCorrupt)
		}
		for ; rep > 0; rep-- {
			lens[i] = v
			i++
		}
	}
	if lens[256] == 0 {
		return fmt.Errorf("%w: no end-of-block code", ErrCorrupt)
	}
	if err := f.lit.build(lens[:nlit], litPrimaryBits); err != nil {
		return err
	}
	return f.dist.build(lens[nlit:], distPrimaryBits)
}

// codes decodes the Huffman-coded data of a block. The bit buffer is kept
// in locals (written back around the slow refill).
func (f *inflater) codes(out []byte, pos int, lit, dist *huffTable) (int, error) {
	bitbuf, nb := f.bits, f.nb
	in := f.in
	litTab, litMask, litBits := lit.tab, lit.mask, lit.pbits
	for {
		if nb < 48 {
			if in.w-in.r >= 8 {
				bitbuf |= binary.LittleEndian.Uint64(in.buf[in.r:]) << nb
				in.r += int(63-nb) >> 3
				nb |= 56
			} else {
				f.bits, f.nb = bitbuf, nb
				if err := f.refill(); err != nil {
					return 0, err
				}
				bitbuf, nb = f.bits, f.nb
			}
		}
		// Up to 48 bits: a literal/length code (15), its extra bits (5), a
		// distance code (15) and its extra bits (13).
		e := litTab[bitbuf&litMask]
		if e&subFlag != 0 {
			e = litTab[uint(e>>16)+uint((bitbuf>>litBits)&(1<<((e>>8)&0xf)-1))]
		}
		n := uint(e & 0xff)
		if n == 0 {
			return 0, fmt.Errorf("%w: invalid Huffman code", ErrCorrupt)
		}
		bitbuf >>= n
		nb -= n
		s := int(e >> 16)
		if s < 256 {
			if pos >= len(out) {
				return 0, fmt.Errorf("%w: data inflates to more than its header says", ErrCorrupt)
			}
			out[pos] = byte(s)
			pos++
			continue
		}
		if s == 256 {
			f.bits, f.nb = bitbuf, nb
			return pos, nil
		}
		s -= 257
		if s >= len(lengthBase) {
			return 0, fmt.Errorf("%w: invalid length code", ErrCorrupt)
		}
		xb := uint(lengthExtra[s])
		length := int(lengthBase[s]) + int(bitbuf&(1<<xb-1))
		bitbuf >>= xb
		nb -= xb
		e = dist.tab[bitbuf&dist.mask]
		if e&subFlag != 0 {
			e = dist.tab[uint(e>>16)+uint((bitbuf>>dist.pbits)&(1<<((e>>8)&0xf)-1))]
		}
		n = uint(e & 0xff)
		if n == 0 {
			return 0, fmt.Errorf("%w: invalid Huffman code", ErrCorrupt)
		}
		bitbuf >>= n
		nb -= n
		ds := int(e >> 16)
		if ds >= len(distBase) {
			return 0, fmt.Errorf("%w: invalid distance code", ErrCorrupt)
		}
		xb = uint(distExtra[ds])
		d := int(distBase[ds]) + int(bitbuf&(1<<xb-1))
		bitbuf >>= xb
		nb -= xb
		if d > pos {
			return 0, fmt.Errorf("%w: back-reference before the start of the data", ErrCorrupt)
		}
		if length > len(out)-pos {
			return 0, fmt.Errorf("%w: data inflates to more than its header says", ErrCorrupt)
		}
		if d >= length {
			copy(out[pos:pos+length], out[pos-d:])
			pos += length
			continue
		}
		// Overlapping: the copy repeats the last d bytes.
		end := pos + length
		for pos < end {
			pos += copy(out[pos:end], out[pos-d:pos])
		}
	}
}
