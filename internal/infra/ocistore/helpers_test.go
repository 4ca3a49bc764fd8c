package ocistore

import (
	"context"
	"crypto/sha256"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/infra/errclass"
)

func newStore(t *testing.T, quota int64) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), quota)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startRegistry(t *testing.T) *ociregistry.Registry {
	t.Helper()
	r, err := ociregistry.Start(ociregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func registrySource(r *ociregistry.Registry) Source {
	return Source{Name: "registry", Registry: r.Addr(), Insecure: true, Anonymous: true}
}

func peerSource(id, addr string) Source {
	return Source{Name: "peer:" + id, Registry: addr, Insecure: true, Anonymous: true}
}

func layer(t *testing.T, seed int64, i int, size int64) v1.Layer {
	t.Helper()
	l, err := ociregistry.RandomLayer(seed, i, size)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// pushImage pushes an image of layers to repo:tag and returns its
// reference by tag, its digest and its blobs' digests (config first).
func pushImage(t *testing.T, r *ociregistry.Registry, repo, tag string, layers ...v1.Layer) (ref, digest string, blobs []string) {
	t.Helper()
	img, err := ociregistry.ImageOf(layers...)
	if err != nil {
		t.Fatal(err)
	}
	ref = r.Ref(repo, tag)
	if digest, err = r.Push(ref, img); err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	blobs = append(blobs, m.Config.Digest.String())
	for _, l := range m.Layers {
		blobs = append(blobs, l.Digest.String())
	}
	return ref, digest, blobs
}

func digestOf(t *testing.T, l v1.Layer) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func has(s *Store, digest string) bool {
	hex, ok := hexOf(digest)
	if !ok {
		return false
	}
	_, err := os.Stat(s.blobPath(hex))
	return err == nil
}

// noTemps fails if a temporary file was left behind.
func noTemps(t *testing.T, s *Store) {
	t.Helper()
	for _, d := range []string{s.Dir(), s.blobDir()} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				t.Errorf("temporary file left: %s", filepath.Join(d, e.Name()))
			}
		}
	}
}

func wantClass(t *testing.T, err error, class errclass.Class, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s %q", class, reason)
	}
	c := errclass.Classify(err)
	if c.Class != class || !strings.Contains(c.Reason, reason) {
		t.Fatalf("error %v classified %s %q, want %s containing %q", err, c.Class, c.Reason, class, reason)
	}
}

func pull(t *testing.T, s *Store, name, ref string, sources ...Source) PullResult {
	t.Helper()
	res, err := s.Pull(context.Background(), name, ref, sources, PullOptions{})
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return res
}

// cutting wraps a peer handler so that GETs of one blob send only the first
// n bytes and then drop the connection, or, with flip, send every byte but
// one byte changed.
func cutting(h http.Handler, digest string, n int64, flip bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+digest) {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&cutWriter{ResponseWriter: w, left: n, flip: flip}, r)
	})
}

type cutWriter struct {
	http.ResponseWriter
	left int64
	flip bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.flip {
		if c.left >= 0 && c.left < int64(len(p)) {
			q := append([]byte(nil), p...)
			q[c.left] ^= 1
			p = q
		}
		c.left -= int64(len(p))
		return c.ResponseWriter.Write(p)
	}
	if int64(len(p)) <= c.left {
		c.left -= int64(len(p))
		return c.ResponseWriter.Write(p)
	}
	c.ResponseWriter.Write(p[:c.left])
	http.NewResponseController(c.ResponseWriter).Flush()
	panic(http.ErrAbortHandler)
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
