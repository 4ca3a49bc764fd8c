package ocistore

import (
	"bytes"
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitfleet/internal/infra/errclass"
)

// Put writes a locally built image under name, as Pull would (quota,
// verification, manifest last), and returns its manifest digest.
func (s *Store) Put(ctx context.Context, name string, img v1.Image) (string, error) {
	if name == "" {
		return "", errclass.Permanentf(errclass.ReasonInvalidInput, "put: empty image name")
	}
	raw, err := img.RawManifest()
	if err != nil {
		return "", fmt.Errorf("ocistore: put %s: %w", name, err)
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return "", fmt.Errorf("ocistore: put %s: %w", name, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("ocistore: put %s: %w", name, err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return "", errclass.Permanentf(errclass.ReasonInvalidInput, "put %s: %v", name, err)
	}
	manifest, err := blobOf(v1.Descriptor{Digest: d, Size: int64(len(raw))})
	if err != nil {
		return "", errclass.Permanentf(errclass.ReasonInvalidInput, "put %s: %v", name, err)
	}
	blobs, err := imageBlobs(m)
	if err != nil {
		return "", errclass.Permanentf(errclass.ReasonInvalidInput, "put %s: %v", name, err)
	}
	j, err := s.begin(name, append(blobs, manifest))
	if err != nil {
		return "", err
	}
	defer j.end()

	buf := make([]byte, copyBuffer)
	for _, b := range blobs {
		_, err := s.ensure(ctx, b, func(*flight) error {
			if b.digest == m.Config.Digest.String() {
				cfg, err := img.RawConfigFile()
				if err != nil {
					return err
				}
				return s.ingest(bytes.NewReader(cfg), b, buf, nil)
			}
			h, _ := v1.NewHash(b.digest)
			l, err := img.LayerByDigest(h)
			if err != nil {
				return err
			}
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			defer rc.Close()
			return s.ingest(rc, b, buf, nil)
		}, nil)
		if err != nil {
			return "", fmt.Errorf("ocistore: put %s: blob %s: %w", name, b.digest, err)
		}
	}
	if _, err := s.ensure(ctx, manifest, func(*flight) error {
		return s.ingest(bytes.NewReader(raw), manifest, buf, nil)
	}, nil); err != nil {
		return "", fmt.Errorf("ocistore: put %s: manifest: %w", name, err)
	}
	if err := s.record(name, manifest.digest, mediaType, manifest.size); err != nil {
		return "", err
	}
	return manifest.digest, nil
}
