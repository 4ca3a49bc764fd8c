package ocibuild

import (
	"bufio"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// fileLayer is a layer spooled to a gzipped tar file, with the digests
// computed while it was written. tarball.LayerFromOpener would hash the file
// twice more at construction, and recompress it on every read when given
// the plain tar.
type fileLayer struct {
	path      string
	digest    v1.Hash
	diffID    v1.Hash
	size      int64
	mediaType types.MediaType
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }

func (l *fileLayer) Compressed() (io.ReadCloser, error) { return os.Open(l.path) }

func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &gunzipReader{Reader: zr, f: f}, nil
}

type gunzipReader struct {
	*gzip.Reader
	f *os.File
}

func (r *gunzipReader) Close() error {
	_ = r.Reader.Close() // the gzip reader's error is the file's, returned below
	return r.f.Close()
}
