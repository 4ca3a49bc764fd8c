package archive

import (
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	txz "github.com/therootcompany/xz"
)

// decompressor opens the compressed stream of format f that r reads,
// holding a zstd or xz decoder to window (see streamMemory). On failure it
// says why.
func decompressor(f Format, r io.Reader, window int64) (_ io.ReadCloser, reason Reason, err error) {
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
		rc, err := newZstd(r, window)
		if err != nil {
			return nil, SkipCorrupt, err
		}
		return rc, "", nil
	case Xz:
		// The decoder refuses a block whose dictionary is over window as
		// it reaches the block's header, before allocating it (the
		// stream's index cannot be trusted to list every block).
		x, err := txz.NewReader(r, uint32(min(window, 1<<32-1)))
		if err != nil {
			return nil, reasonOf(err), err
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

func newZstd(r io.Reader, window int64) (io.ReadCloser, error) {
	// One goroutine-free decoder per stream, held to the window granted
	// (a single segment's content size is bounded by MaxMemory, not by
	// MaxWindow).
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(uint64(window)), zstd.WithDecoderMaxMemory(uint64(window)))
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// reasonOf is why a stream failed: memory when it would take more than
// granted (the walk's refusal, or its decoder's), damage otherwise.
func reasonOf(err error) Reason {
	var m *errMemory
	if errors.As(err, &m) || errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) ||
		errors.Is(err, txz.ErrMemlimit) {
		return SkipMemory
	}
	return SkipCorrupt
}
