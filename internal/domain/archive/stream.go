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

// decompressor opens the compressed stream of format f that r reads. On
// failure it says why.
func decompressor(f Format, r io.Reader) (_ io.ReadCloser, reason Reason, err error) {
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
		// The decoder refuses a block whose dictionary is over MaxWindow
		// as it reaches the block's header, before allocating it (the
		// stream's index cannot be trusted to list every block).
		x, err := txz.NewReader(r, MaxWindow)
		switch {
		case memoryError(err):
			return nil, SkipMemory, err
		case err != nil:
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
	return errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) ||
		errors.Is(err, txz.ErrMemlimit)
}
