package archive

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// decompressor opens the compressed stream of format f that r reads; all is
// its whole content for xz (nil otherwise). On failure it says why.
func decompressor(f Format, r io.Reader, all []byte) (_ io.ReadCloser, reason Reason, err error) {
	defer func() { // see safeRead
		if v := recover(); v != nil {
			reason, err = SkipCorrupt, fmt.Errorf("decompressor failure: %v", v)
		}
	}()
	switch f {
	case Gzip:
		// Multistream, as gzip reads concatenated members.
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, SkipCorrupt, err
		}
		return z, "", nil
	case Bzip2:
		return io.NopCloser(newBzip2(r)), "", nil
	case Zstd:
		rc, err := newZstd(r)
		if err != nil {
			return nil, SkipCorrupt, err
		}
		return rc, "", nil
	case Xz:
		// The reader allocates the dictionary an xz header asks for, up
		// to 4 GiB, before producing a byte: ask the headers first.
		dict, err := xzDictSize(all)
		switch {
		case err != nil:
			return nil, SkipCorrupt, err
		case dict > MaxWindow:
			return nil, SkipMemory, fmt.Errorf("xz: a %d-byte dictionary", dict)
		}
		x, err := xz.ReaderConfig{DictCap: xzMinDict}.NewReader(bytes.NewReader(all))
		if err != nil {
			return nil, SkipCorrupt, err
		}
		return io.NopCloser(x), "", nil
	case Snappy:
		// Snappy's blocks are at most 64 KiB, S2's 4 MiB: allocate as
		// the blocks come.
		return io.NopCloser(s2.NewReader(r, s2.ReaderAllocBlock(64<<10))), "", nil
	}
	return nil, SkipUnsupported, fmt.Errorf("%s is no compressed stream", f)
}

func newBzip2(r io.Reader) io.Reader { return bzip2.NewReader(r) }

func newZstd(r io.Reader) (io.ReadCloser, error) {
	// One goroutine-free decoder per stream; its window is bounded so
	// that a header cannot make it allocate gigabytes.
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(MaxWindow))
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// memoryError reports whether a decompressor refused a stream for the
// memory it would take.
func memoryError(err error) bool {
	return errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded)
}

// xzMinDict is the smallest dictionary the xz reader accepts as its
// minimum; it allocates the larger of it and what the header asks.
const xzMinDict = 4096

// xzDictSize returns the largest LZMA2 dictionary the blocks of an xz file
// declare, reading its structure from the end as the format allows:
// stream footer, index, and from the index the offset of each block
// header, stream by stream (concatenated streams and their padding
// included). It checks the structure, not the checksums: the reader does.
func xzDictSize(b []byte) (int64, error) {
	bad := func(what string) (int64, error) { return 0, fmt.Errorf("xz: %s", what) }
	var largest int64
	end := len(b)
	for end > 0 {
		for end >= 4 && binary.LittleEndian.Uint32(b[end-4:end]) == 0 {
			end -= 4 // stream padding
		}
		if end == 0 {
			break
		}
		if end < 24 || string(b[end-2:end]) != "YZ" {
			return bad("no stream footer")
		}
		footer := b[end-12 : end]
		indexSize := (int(binary.LittleEndian.Uint32(footer[4:8])) + 1) * 4
		checkSize, ok := xzCheckSize(footer[9])
		if !ok || footer[8] != 0 {
			return bad("bad stream flags")
		}
		indexStart := end - 12 - indexSize
		if indexStart < 12 || indexSize < 8 {
			return bad("bad index size")
		}
		index := b[indexStart : end-12]
		if index[0] != 0 {
			return bad("no index")
		}
		pos := 1
		records, n := binary.Uvarint(index[pos:])
		if n <= 0 || records > uint64(len(index)) {
			return bad("bad index")
		}
		pos += n
		sizes := make([]int, 0, records)
		total := 0
		for range records {
			unpadded, n := binary.Uvarint(index[pos:])
			if n <= 0 || unpadded == 0 || unpadded > uint64(len(b)) {
				return bad("bad index record")
			}
			pos += n
			if _, n = binary.Uvarint(index[pos:]); n <= 0 {
				return bad("bad index record")
			}
			pos += n
			sizes = append(sizes, int(unpadded))
			total += pad4(int(unpadded))
			if total > indexStart {
				return bad("blocks larger than the file")
			}
		}
		start := indexStart - total - 12
		if start < 0 || !bytes.HasPrefix(b[start:], xzMagic) || b[start+6] != footer[8] || b[start+7] != footer[9] {
			return bad("no stream header where the index says")
		}
		at := start + 12
		for _, size := range sizes {
			dict, err := xzBlockDict(b[at:at+size], checkSize)
			if err != nil {
				return 0, err
			}
			largest = max(largest, dict)
			at += pad4(size)
		}
		end = start
	}
	return largest, nil
}

// xzBlockDict reads a block header (block is the block's unpadded bytes)
// and returns its LZMA2 filter's dictionary size, 0 when it has none.
func xzBlockDict(block []byte, checkSize int) (int64, error) {
	bad := func(what string) (int64, error) { return 0, fmt.Errorf("xz: block header: %s", what) }
	if len(block) < 1 || block[0] == 0 {
		return bad("missing")
	}
	size := (int(block[0]) + 1) * 4
	if size+checkSize > len(block) {
		return bad("larger than its block")
	}
	h := block[:size-4] // without its CRC32
	flags := h[1]
	if flags&0x3c != 0 {
		return bad("reserved flags")
	}
	pos := 2
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} { // compressed, uncompressed size
		if present {
			_, n := binary.Uvarint(h[pos:])
			if n <= 0 {
				return bad("bad size")
			}
			pos += n
		}
	}
	var dict int64
	for range int(flags&0x3) + 1 {
		id, n := binary.Uvarint(h[pos:])
		if n <= 0 {
			return bad("bad filter")
		}
		pos += n
		props, n := binary.Uvarint(h[pos:])
		if n <= 0 || props > uint64(len(h)-pos-n) {
			return bad("bad filter properties")
		}
		pos += n
		if id == 0x21 { // LZMA2: one byte, the dictionary size
			if props != 1 || h[pos] > 40 {
				return bad("bad LZMA2 properties")
			}
			bits := int64(h[pos])
			dict = (2 | bits&1) << (bits/2 + 11)
			if bits == 40 {
				dict = 1<<32 - 1
			}
		}
		pos += int(props)
	}
	return dict, nil
}

// xzCheckSize is the size of a block's check, by check type.
func xzCheckSize(t byte) (int, bool) {
	if t > 0xf {
		return 0, false
	}
	return [16]int{0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64}[t], true
}

func pad4(n int) int { return (n + 3) &^ 3 }
