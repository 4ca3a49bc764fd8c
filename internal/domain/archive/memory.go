package archive

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Memory. Besides the walked content, a walk holds the file being read at
// each level (a nested zip whole), the parsed directory of each zip open
// and the window or dictionary of each decompressor open. Limits.Memory
// bounds their sum, all levels together, and each is checked against what
// is left before it is allocated: sizes come from the headers that ask
// for them (a zstd frame's window, an xz block's dictionary, a bzip2
// stream's block size, a zip's end of central directory), and the
// decoders are held to what was granted (a later frame or block asking
// more is refused by the decoder). What would pass the limit is skipped
// (SkipMemory). A Pool bounds the walks at once across goroutines, so a
// process's archive memory is the pool's walks × Limits.Memory, whatever
// the number of blobs read in parallel.

// Memory of the decoders besides their windows, and of a parsed zip entry
// besides its bytes in the central directory.
const (
	gzipMemory     = 64 << 10           // flate's window, tables and buffer
	snappyMemory   = 2*(4<<20) + 64<<10 // an S2 block (4 MiB at most) decoded and encoded
	zstdOverhead   = 1 << 20            // block buffers beside the window
	xzOverhead     = 64 << 10           // the LZMA state beside the dictionary
	bzip2Overhead  = 64 << 10           // tables beside the block (4 bytes per byte)
	zipEntryMemory = 320                // a zip.File and its slice's share
	// skippableWindow bounds the frames after a first zstd frame that is
	// skippable (and says nothing of them): zstd's default window.
	skippableWindow = 8 << 20
)

// Pool bounds the walks in progress at once. The zero Pool, or a nil one,
// bounds nothing.
type Pool struct{ slots chan struct{} }

// NewPool is a pool of walks walks at once (at least 1).
func NewPool(walks int) *Pool { return &Pool{slots: make(chan struct{}, max(walks, 1))} }

func (p *Pool) acquire() {
	if p != nil && p.slots != nil {
		p.slots <- struct{}{}
	}
}

func (p *Pool) release() {
	if p != nil && p.slots != nil {
		<-p.slots
	}
}

// errMemory is a refusal for the walk's memory limit.
type errMemory struct{ what, detail string }

func (e *errMemory) Error() string { return e.what + " " + e.detail }

// reserve accounts n more bytes held for what; it refuses (held unchanged)
// when the walk's memory would pass its limit.
func (w *walker) reserve(n int64, what string) error {
	limit := w.opt.Limits.Memory
	if n > limit-w.held {
		return &errMemory{what, fmt.Sprintf("would take %d bytes of memory; %d of the walk's %d are left", n, max(limit-w.held, 0), limit)}
	}
	w.held += n
	return nil
}

func (w *walker) unreserve(n int64) { w.held -= n }

// streamMemory is what decompressing a stream of format f whose first
// bytes are head takes, and the window or dictionary its decoder is held
// to (0: none to hold).
func streamMemory(f Format, head []byte) (need, window int64, err error) {
	switch f {
	case Gzip:
		return gzipMemory, 0, nil
	case Bzip2:
		// "BZh" and the block size in 100 kB, 1 to 9 (Detect checked).
		block := int64(head[3]-'0') * 100_000
		return 4*block + bzip2Overhead, 0, nil
	case Snappy:
		return snappyMemory, 0, nil
	case Zstd:
		window, err := zstdWindow(head)
		return window + zstdOverhead, window, err
	case Xz:
		dict, err := xzDict(head)
		return dict + xzOverhead, dict, err
	}
	return 0, 0, fmt.Errorf("%s is no compressed stream", f)
}

// zstdWindow is the window the first frame of a zstd stream asks for: its
// window, or for a single segment its content size.
func zstdWindow(head []byte) (int64, error) {
	var h zstd.Header
	if err := h.Decode(head); err != nil {
		return 0, fmt.Errorf("zstd frame header: %w", err)
	}
	var w uint64
	switch {
	case h.Skippable:
		w = skippableWindow
	case h.SingleSegment:
		w = h.FrameContentSize
	default:
		w = h.WindowSize
	}
	return int64(min(max(w, zstd.MinWindowSize), 1<<62)), nil
}

// xzDict is the LZMA2 dictionary the first block of an xz stream asks
// for; the smallest the decoder takes for a stream with no block.
func xzDict(head []byte) (int64, error) {
	const minDict = 4096
	if len(head) < 13 {
		return 0, errors.New("xz: no block header")
	}
	if head[12] == 0 { // the index: no block
		return minDict, nil
	}
	size := (int(head[12]) + 1) * 4
	if 12+size > len(head) {
		return 0, errors.New("xz: block header cut short")
	}
	h := head[12 : 12+size-4] // without its CRC32 (the decoder checks it)
	flags := h[1]
	if flags&0x3c != 0 {
		return 0, errors.New("xz: block header: reserved flags")
	}
	pos := 2
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} { // compressed, uncompressed size
		if present {
			_, n := binary.Uvarint(h[pos:])
			if n <= 0 {
				return 0, errors.New("xz: block header: bad size")
			}
			pos += n
		}
	}
	for range int(flags&0x3) + 1 {
		id, n := binary.Uvarint(h[pos:])
		if n <= 0 {
			return 0, errors.New("xz: block header: bad filter")
		}
		pos += n
		props, n := binary.Uvarint(h[pos:])
		if n <= 0 || props > uint64(len(h)-pos-n) {
			return 0, errors.New("xz: block header: bad filter properties")
		}
		pos += n
		if id == 0x21 { // LZMA2, the last filter: one byte, the dictionary size
			if props != 1 || h[pos] > 40 {
				return 0, errors.New("xz: block header: bad LZMA2 properties")
			}
			bits := int64(h[pos])
			if bits == 40 {
				return 1<<32 - 1, nil
			}
			return max((2|bits&1)<<(bits/2+11), minDict), nil
		}
		pos += int(props)
	}
	return 0, errors.New("xz: block header: no LZMA2 filter")
}

// zipDirectoryMemory is what parsing the central directory of zip b takes
// at most: zip.NewReader reads a directory header after another from the
// directory's offset on, copying names, comments and extras out of them
// and allocating a zip.File for each, whatever count the end record
// claims. So the bound is the bytes from that offset (zip64's when the end
// record defers to it) to the end record, and one File per 46 of them (a
// header's fixed part). ok is false when b has no end record (zip.NewReader
// refuses it).
func zipDirectoryMemory(b []byte) (need int64, ok bool) {
	const eocdLen, zip64LocatorLen, headerLen = 22, 20, 46
	end := -1
	for i := len(b) - eocdLen; i >= 0 && i >= len(b)-eocdLen-0xffff; i-- {
		if string(b[i:i+4]) == "PK\x05\x06" {
			end = i
			break
		}
	}
	if end < 0 {
		return 0, false
	}
	offset := int64(binary.LittleEndian.Uint32(b[end+16:]))
	if offset == 0xffffffff && end >= zip64LocatorLen && string(b[end-zip64LocatorLen:end-zip64LocatorLen+4]) == "PK\x06\x07" {
		if at := binary.LittleEndian.Uint64(b[end-zip64LocatorLen+8:]); at <= uint64(end) && uint64(end)-at >= 56 &&
			string(b[at:at+4]) == "PK\x06\x06" {
			offset = int64(min(binary.LittleEndian.Uint64(b[at+48:]), uint64(end)))
		}
	}
	region := int64(end)
	if offset >= 0 && offset <= int64(end) {
		region -= offset
	}
	return region + (region/headerLen+1)*zipEntryMemory, true
}

// entryHeadLen is how much of a zip entry's compressed stream is read
// ahead for its header: a zstd frame header (at most 18 bytes), bzip2's 4.
const entryHeadLen = 32
