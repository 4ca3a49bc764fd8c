package gitread

import (
	"compress/flate"
	"compress/zlib"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// DataError marks an error of go-git's object reading that says the
// repository's data is damaged (bad zlib data, a truncated object file or
// pack, a malformed header, index or delta) as ErrCorrupt, so that it is
// told apart from the file system failing: reading damaged data again
// gives the same error, and errclass classifies it Permanent. Other errors
// (not found, I/O) are returned as they are.
func DataError(err error) error {
	if err == nil || errors.Is(err, ErrCorrupt) || !isDataError(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

func isDataError(err error) bool {
	var flateErr flate.CorruptInputError
	var packErr *packfile.Error
	switch {
	case errors.As(err, &flateErr), errors.As(err, &packErr),
		errors.Is(err, zlib.ErrChecksum), errors.Is(err, zlib.ErrHeader), errors.Is(err, zlib.ErrDictionary),
		// Object data read from a local file that ends early is cut short,
		// not interrupted by a network.
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, objfile.ErrHeader), errors.Is(err, objfile.ErrNegativeSize), errors.Is(err, objfile.ErrOverflow),
		errors.Is(err, packfile.ErrMalformedPackFile), errors.Is(err, packfile.ErrInvalidDelta),
		errors.Is(err, packfile.ErrDeltaCmd), errors.Is(err, packfile.ErrLengthOverflow),
		errors.Is(err, packfile.ErrInflatedSizeMismatch), errors.Is(err, packfile.ErrReferenceDeltaNotFound),
		errors.Is(err, idxfile.ErrMalformedIdxFile), errors.Is(err, idxfile.ErrUnsupportedVersion),
		errors.Is(err, plumbing.ErrInvalidType):
		return true
	}
	return false
}
