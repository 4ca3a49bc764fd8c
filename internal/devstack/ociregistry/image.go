package ociregistry

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RandomImage builds a deterministic linux/amd64 OCI image of n random
// layers of about size bytes each (RandomLayer(seed, i, size) for i < n).
func RandomImage(seed int64, layers int, size int64) (v1.Image, error) {
	ls := make([]v1.Layer, layers)
	for i := range ls {
		l, err := RandomLayer(seed, i, size)
		if err != nil {
			return nil, err
		}
		ls[i] = l
	}
	return ImageOf(ls...)
}

// ImageOf builds a linux/amd64 OCI image of the given layers, for tests
// that compose images sharing layers.
func ImageOf(layers ...v1.Layer) (v1.Image, error) {
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	base, err := mutate.ConfigFile(base, &v1.ConfigFile{OS: "linux", Architecture: "amd64"})
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(base, layers...)
}

// RandomLayer builds layer index of seed: an uncompressed tar holding one
// file of random bytes, size bytes long in all when size is a multiple of
// 512 and at least 2048 (a little more otherwise). Its bytes are generated
// anew on every read.
func RandomLayer(seed int64, index int, size int64) (v1.Layer, error) {
	content := max(size-3*512, 1)
	var hdr bytes.Buffer
	err := tar.NewWriter(&hdr).WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     fmt.Sprintf("random-%d-%d", seed, index),
		Mode:     0o644,
		Size:     content,
		ModTime:  time.Unix(0, 0),
		Format:   tar.FormatUSTAR,
	})
	if err != nil {
		return nil, err
	}
	l := &randomLayer{header: hdr.Bytes(), content: content}
	binary.LittleEndian.PutUint64(l.seed[0:], uint64(seed))
	binary.LittleEndian.PutUint64(l.seed[8:], uint64(index))
	l.size = int64(len(l.header)) + content + l.padding()
	h := sha256.New()
	if _, err := io.Copy(h, l.reader()); err != nil {
		return nil, err
	}
	l.digest = v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", h.Sum(nil))}
	return l, nil
}

type randomLayer struct {
	seed    [32]byte
	header  []byte
	content int64
	size    int64
	digest  v1.Hash
}

// padding is the zero fill of the file's last block plus the two-block end
// of archive marker.
func (l *randomLayer) padding() int64 { return (512-l.content%512)%512 + 2*512 }

func (l *randomLayer) reader() io.Reader {
	return io.MultiReader(
		bytes.NewReader(l.header),
		io.LimitReader(rand.NewChaCha8(l.seed), l.content),
		io.LimitReader(zeros{}, l.padding()),
	)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func (l *randomLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *randomLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *randomLayer) Size() (int64, error)                 { return l.size, nil }
func (l *randomLayer) MediaType() (types.MediaType, error)  { return types.OCIUncompressedLayer, nil }
func (l *randomLayer) Compressed() (io.ReadCloser, error)   { return io.NopCloser(l.reader()), nil }
func (l *randomLayer) Uncompressed() (io.ReadCloser, error) { return io.NopCloser(l.reader()), nil }
