package ocistore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/infra/errclass"
)

const kb = 1 << 10

func TestPullStoresAVerifiedImageAndSecondPullFetchesNothing(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	ref, digest, blobs := pushImage(t, r, "snapshots/base", "v1",
		layer(t, 1, 0, 64*kb), layer(t, 1, 1, 128*kb), layer(t, 1, 2, 32*kb))

	var calls []Progress
	// Credentials from the default keychain: with no docker config this is
	// anonymous, and it exercises the token handshake path.
	src := Source{Name: "registry", Registry: r.Addr(), Insecure: true}
	res, err := s.Pull(context.Background(), "base", ref, []Source{src}, PullOptions{Progress: func(p Progress) { calls = append(calls, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != digest || res.Fetched != res.Size || res.BySource["registry"] != res.Size || len(res.BySource) != 1 {
		t.Fatalf("result %+v, want digest %s, everything fetched from the registry", res, digest)
	}
	if res.Size < 224*kb || res.Size > 230*kb {
		t.Fatalf("size %d, want about 224 KiB", res.Size)
	}
	if r.BlobBytes() != res.Size-int64(len(mustRead(t, s, digest))) {
		t.Fatalf("registry sent %d blob bytes, want %d (everything but the manifest)", r.BlobBytes(), res.Size)
	}
	for _, b := range append(blobs, digest) {
		if !has(s, b) {
			t.Errorf("blob %s not stored", b)
		}
	}
	if len(calls) == 0 || !reflect.DeepEqual(calls[len(calls)-1], Progress{Done: res.Size, Total: res.Size, Received: map[string]int64{"registry": res.Size}}) {
		t.Fatalf("last progress %+v, want done = total = %d", calls, res.Size)
	}
	for _, p := range calls {
		if p.Done > p.Total || p.Total != res.Size {
			t.Fatalf("progress %+v out of range", p)
		}
	}
	imgs, _ := s.Images()
	if len(imgs) != 1 || imgs[0] != (Image{Name: "base", Digest: digest, Size: res.Size}) {
		t.Fatalf("Images() = %+v", imgs)
	}
	if u, _ := s.Usage(); u != res.Size {
		t.Fatalf("Usage() = %d, want %d", u, res.Size)
	}
	// The directory is a layout other OCI tools read.
	p, err := layout.FromPath(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Annotations[RefNameAnnotation] != "base" {
		t.Fatalf("index.json: %+v, %v", im, err)
	}
	h, _ := v1.NewHash(digest)
	img, err := p.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 3 {
		t.Fatalf("layers from layout: %d, %v", len(ls), err)
	}
	noTemps(t, s)

	r.ResetCounters()
	again := pull(t, s, "base", ref, registrySource(r))
	if again.Fetched != 0 || len(again.BySource) != 0 || r.BlobBytes() != 0 || again.Digest != digest {
		t.Fatalf("second pull: %+v, registry sent %d blob bytes; want nothing", again, r.BlobBytes())
	}
	// By digest, a stored image needs no source at all.
	byDigest := pull(t, s, "base", r.Ref("snapshots/base", digest))
	if byDigest.Fetched != 0 || byDigest.Digest != digest {
		t.Fatalf("pull by stored digest without sources: %+v", byDigest)
	}
}

func mustRead(t *testing.T, s *Store, digest string) []byte {
	t.Helper()
	hex, _ := hexOf(digest)
	b, err := os.ReadFile(s.blobPath(hex))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPullOfImageSharingLayersFetchesOnlyNewOnes(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	l0, l1, l2 := layer(t, 2, 0, 64*kb), layer(t, 2, 1, 64*kb), layer(t, 2, 2, 96*kb)
	refA, _, _ := pushImage(t, r, "snapshots/a", "v1", l0, l1)
	refB, _, blobsB := pushImage(t, r, "snapshots/b", "v1", l0, l1, l2)
	pull(t, s, "a", refA, registrySource(r))
	r.ResetCounters()
	res := pull(t, s, "b", refB, registrySource(r))
	if r.BlobBytesOf(digestOf(t, l0)) != 0 || r.BlobBytesOf(digestOf(t, l1)) != 0 {
		t.Fatal("shared layers fetched again")
	}
	size2, _ := l2.Size()
	if r.BlobBytesOf(digestOf(t, l2)) != size2 {
		t.Fatalf("new layer: %d bytes fetched, want %d", r.BlobBytesOf(digestOf(t, l2)), size2)
	}
	config := r.BlobBytesOf(blobsB[0])
	if res.Fetched != size2+config+int64(len(mustRead(t, s, res.Digest))) {
		t.Fatalf("Fetched = %d, want the new layer, config and manifest", res.Fetched)
	}
}

func TestPullResumesFromCompleteBlobs(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	const size = 64 * kb
	ls := []v1.Layer{layer(t, 3, 0, size), layer(t, 3, 1, size), layer(t, 3, 2, size), layer(t, 3, 3, size)}
	ref, _, blobs := pushImage(t, r, "snapshots/resume", "v1", ls...)
	// Killed while streaming the third layer: config and two layers are in.
	r.FailAfter(digestOf(t, ls[2]), size/2, 1)
	_, err := s.Pull(context.Background(), "resume", ref, []Source{registrySource(r)}, PullOptions{})
	wantClass(t, err, errclass.Retryable, "blob "+digestOf(t, ls[2])+" from registry: truncated")
	// Blobs are fetched two at a time in manifest order: the config is in
	// before the third layer starts, the cut layer is not, and the layers
	// fetched beside it are in only if they arrived whole before the
	// failure stopped them.
	kept := make([]bool, len(blobs))
	for i, b := range blobs {
		kept[i] = has(s, b)
	}
	if !kept[0] || kept[3] {
		t.Fatalf("stored after the cut: %v, want the config and not the cut layer (3)", kept)
	}
	if _, ok, _ := s.Image("resume"); ok {
		t.Fatal("a failed pull recorded the image")
	}
	noTemps(t, s)

	// A restarted runner opens the store again.
	s2, err := Open(s.Dir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	r.ResetCounters()
	res := pull(t, s2, "resume", ref, registrySource(r))
	// What was kept is not fetched again; the rest is, whole (the
	// registry may also count bytes it was still sending on the first
	// pull's stopped connections, so only the puller's count is exact).
	refetched := int64(0)
	for i, b := range blobs {
		got := r.BlobBytesOf(b)
		switch {
		case kept[i] && got != 0:
			t.Errorf("blob %d was kept, yet refetched %d bytes", i, got)
		case !kept[i] && got < size:
			t.Errorf("blob %d refetched %d bytes, want all %d", i, got, size)
		case !kept[i]:
			refetched += size
		}
	}
	if res.Fetched != refetched+int64(len(mustRead(t, s2, res.Digest))) {
		t.Fatalf("Fetched = %d", res.Fetched)
	}
}

// Removing an image a pull never finished collects the blobs that pull
// stored: they would count against the quota for good otherwise.
func TestRemoveOfAnUnfinishedPullCollectsItsBlobs(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	const size = 64 * kb
	ls := []v1.Layer{layer(t, 4, 0, size), layer(t, 4, 1, size)}
	ref, _, blobs := pushImage(t, r, "snapshots/abandoned", "v1", ls...)
	r.FailAfter(digestOf(t, ls[1]), size/2, 1)
	if _, err := s.Pull(context.Background(), "abandoned", ref, []Source{registrySource(r)}, PullOptions{}); err == nil {
		t.Fatal("the pull did not fail")
	}
	if !has(s, blobs[1]) {
		t.Fatalf("the first layer %s was not stored before the failure", blobs[1])
	}
	if err := s.Remove("abandoned"); err != nil {
		t.Fatal(err)
	}
	for _, b := range blobs {
		if has(s, b) {
			t.Errorf("blob %s of the abandoned pull is still stored", b)
		}
	}
}

func TestBadBlobsAreNeverStored(t *testing.T) {
	for _, tc := range []struct {
		name   string
		arm    func(r *ociregistry.Registry, digest string)
		reason string
	}{
		{"corrupt", func(r *ociregistry.Registry, d string) { r.Corrupt(d, 1) }, "digest mismatch"},
		{"truncated", func(r *ociregistry.Registry, d string) { r.Truncate(d, 1) }, "truncated"},
		{"server error", func(r *ociregistry.Registry, d string) { r.Fail(d, 1) }, "HTTP 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRegistry(t)
			s := newStore(t, 0)
			bad := layer(t, 4, 1, 64*kb)
			ref, _, _ := pushImage(t, r, "snapshots/bad", "v1", layer(t, 4, 0, 32*kb), bad)
			tc.arm(r, digestOf(t, bad))
			_, err := s.Pull(context.Background(), "bad", ref, []Source{registrySource(r)}, PullOptions{})
			wantClass(t, err, errclass.Retryable, fmt.Sprintf("blob %s from registry: %s", digestOf(t, bad), tc.reason))
			if has(s, digestOf(t, bad)) {
				t.Fatal("bad blob stored")
			}
			if imgs, _ := s.Images(); len(imgs) != 0 {
				t.Fatalf("images after a failed pull: %+v", imgs)
			}
			noTemps(t, s)
			res := pull(t, s, "bad", ref, registrySource(r))
			if !has(s, digestOf(t, bad)) || res.Digest == "" {
				t.Fatal("pull after the fault cleared did not store the blob")
			}
		})
	}
}

// peerOf serves a store's PeerHandler on loopback, optionally wrapped.
func peerOf(t *testing.T, s *Store, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := s.PeerHandler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestFailingPeerFallsBackToTheRegistry(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(digest string) func(http.Handler) http.Handler
	}{
		{"peer dies mid-transfer", func(d string) func(http.Handler) http.Handler {
			return func(h http.Handler) http.Handler { return cutting(h, d, 40*kb, false) }
		}},
		{"peer serves a wrong digest", func(d string) func(http.Handler) http.Handler {
			return func(h http.Handler) http.Handler { return cutting(h, d, 50*kb, true) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRegistry(t)
			a, b := newStore(t, 0), newStore(t, 0)
			l0, l1, l2 := layer(t, 5, 0, 64*kb), layer(t, 5, 1, 128*kb), layer(t, 5, 2, 64*kb)
			_, digest, _ := pushImage(t, r, "snapshots/peer", "v1", l0, l1, l2)
			ref := r.Ref("snapshots/peer", digest)
			pull(t, a, "peer", ref, registrySource(r))
			peer := peerOf(t, a, tc.wrap(digestOf(t, l1)))
			r.ResetCounters()

			res := pull(t, b, "peer", ref, peerSource("a", peer), registrySource(r))
			size1, _ := l1.Size()
			if res.BySource["registry"] != size1 || res.BySource["peer:a"] != res.Size-size1 {
				t.Fatalf("BySource = %v, want the failing layer (%d) from the registry, the rest (%d) from the peer",
					res.BySource, size1, res.Size-size1)
			}
			if r.BlobBytesOf(digestOf(t, l1)) != size1 || r.BlobBytes() != size1 {
				t.Fatalf("registry sent %d bytes (%d of the layer), want only the layer", r.BlobBytes(), r.BlobBytesOf(digestOf(t, l1)))
			}
			if res.Digest != digest {
				t.Fatal("wrong image")
			}
			noTemps(t, b)
		})
	}
}

func TestQuota(t *testing.T) {
	r := startRegistry(t)
	ref, _, _ := pushImage(t, r, "snapshots/big", "v1", layer(t, 6, 0, 256*kb), layer(t, 6, 1, 256*kb))
	probe := newStore(t, 0)
	size := pull(t, probe, "big", ref, registrySource(r)).Size

	t.Run("exceeded", func(t *testing.T) {
		s := newStore(t, size-1)
		r.ResetCounters()
		_, err := s.Pull(context.Background(), "big", ref, []Source{registrySource(r)}, PullOptions{})
		wantClass(t, err, errclass.Permanent, "exceeds store quota")
		want := fmt.Sprintf("image %s needs %d bytes; runner store quota is %d bytes with 0 in use", ref, size, size-1)
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("message %q, want %q", err, want)
		}
		if u, _ := s.Usage(); u != 0 || r.BlobBytes() != 0 {
			t.Fatalf("usage %d, registry sent %d bytes: want nothing", u, r.BlobBytes())
		}
		ents, _ := os.ReadDir(s.blobDir())
		if len(ents) != 0 {
			t.Fatalf("%d files in blobs", len(ents))
		}
	})
	t.Run("exactly enough", func(t *testing.T) {
		s := newStore(t, size)
		pull(t, s, "big", ref, registrySource(r))
		// Already present: needs nothing more.
		pull(t, s, "big", ref, registrySource(r))
	})
	t.Run("counts what is in use", func(t *testing.T) {
		s := newStore(t, size+100*kb)
		other, _, _ := pushImage(t, r, "snapshots/other", "v1", layer(t, 6, 9, 128*kb))
		pull(t, s, "other", other, registrySource(r))
		_, err := s.Pull(context.Background(), "big", ref, []Source{registrySource(r)}, PullOptions{})
		wantClass(t, err, errclass.Permanent, "exceeds store quota")
		if err := s.Remove("other"); err != nil {
			t.Fatal(err)
		}
		pull(t, s, "big", ref, registrySource(r))
	})
}

func TestNotFound(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	emptyPeer := peerOf(t, newStore(t, 0), nil)
	for _, ref := range []string{
		r.Ref("snapshots/missing", "v1"),
		r.Ref("snapshots/missing", "sha256:"+strings.Repeat("ab", 32)),
	} {
		_, err := s.Pull(context.Background(), "x", ref, []Source{peerSource("p", emptyPeer), registrySource(r)}, PullOptions{})
		wantClass(t, err, errclass.Permanent, errclass.ReasonNotFound)
		if !strings.Contains(err.Error(), "image "+ref+" not found") {
			t.Fatalf("message %q", err)
		}
	}
	// A source that cannot be reached might have had it: retry.
	_, err := s.Pull(context.Background(), "x", r.Ref("snapshots/missing", "v1"),
		[]Source{peerSource("gone", "127.0.0.1:1"), registrySource(r)}, PullOptions{})
	wantClass(t, err, errclass.Retryable, "manifest from registry: manifest unknown")
	if !strings.Contains(err.Error(), "from peer:gone") {
		t.Fatalf("message %q does not name the unreachable peer", err)
	}
}

func TestRemoveKeepsSharedLayers(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	shared, onlyA, onlyB := layer(t, 7, 0, 64*kb), layer(t, 7, 1, 64*kb), layer(t, 7, 2, 64*kb)
	refA, digestA, blobsA := pushImage(t, r, "snapshots/a", "v1", shared, onlyA)
	refB, digestB, blobsB := pushImage(t, r, "snapshots/b", "v1", shared, onlyB)
	pull(t, s, "a", refA, registrySource(r))
	resB := pull(t, s, "b", refB, registrySource(r))

	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{digestA, blobsA[0], digestOf(t, onlyA)} {
		if has(s, d) {
			t.Errorf("unshared blob %s of the removed image kept", d)
		}
	}
	for _, d := range append(blobsB, digestB) {
		if !has(s, d) {
			t.Errorf("blob %s of the remaining image removed", d)
		}
	}
	if u, _ := s.Usage(); u != resB.Size {
		t.Fatalf("Usage() = %d, want %d", u, resB.Size)
	}
	if _, ok, _ := s.Image("a"); ok {
		t.Fatal("removed image still listed")
	}
	if err := s.Remove("a"); err != nil {
		t.Fatalf("removing an absent name: %v", err)
	}
	if err := s.Remove("b"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(s.blobDir()); len(ents) != 0 {
		t.Fatalf("%d blobs left in an empty store", len(ents))
	}
	if u, _ := s.Usage(); u != 0 {
		t.Fatalf("Usage() = %d in an empty store", u)
	}
}

func TestGCSparesPinnedBlobs(t *testing.T) {
	s := newStore(t, 0)
	content := []byte("a blob a pull is about to reference")
	b, err := blobOf(v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256Sum(content))}, Size: int64(len(content))})
	if err != nil {
		t.Fatal(err)
	}
	j, err := s.begin("test", []blob{b})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ingest(strings.NewReader(string(content)), b, make([]byte, 16), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.GC(); err != nil {
		t.Fatal(err)
	}
	if !has(s, b.digest) {
		t.Fatal("GC removed a pinned blob")
	}
	j.end()
	if err := s.GC(); err != nil {
		t.Fatal(err)
	}
	if has(s, b.digest) {
		t.Fatal("GC kept an unreferenced, unpinned blob")
	}
}

func TestPeerHandlerServesAnotherStore(t *testing.T) {
	r := startRegistry(t)
	a, b := newStore(t, 0), newStore(t, 0)
	_, digest, blobs := pushImage(t, r, "snapshots/shared", "v1", layer(t, 8, 0, 64*kb), layer(t, 8, 1, 64*kb))
	pull(t, a, "shared-v1", r.Ref("snapshots/shared", digest), registrySource(r))
	peer := peerOf(t, a, nil)

	res := pull(t, b, "shared", "registry.invalid/snapshots/shared@"+digest, peerSource("a", peer))
	if res.Digest != digest || res.BySource["peer:a"] != res.Size || a.ServedBytes() != res.Size {
		t.Fatalf("pull from peer: %+v; peer served %d bytes", res, a.ServedBytes())
	}
	for _, d := range blobs {
		if !has(b, d) {
			t.Fatalf("blob %s missing", d)
		}
	}
	// A tag equal to a stored image name resolves too.
	c := newStore(t, 0)
	if res := pull(t, c, "by-tag", "registry.invalid/whatever:shared-v1", peerSource("a", peer)); res.Digest != digest {
		t.Fatalf("by tag: %s", res.Digest)
	}
}

func TestPeerHandlerRejects(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	l := layer(t, 9, 0, 4*kb)
	_, digest, _ := pushImage(t, r, "snapshots/p", "v1", l)
	pull(t, s, "p", r.Ref("snapshots/p", digest), registrySource(r))
	// A temporary file must never be reachable, even if its name were.
	os.WriteFile(filepath.Join(s.blobDir(), tmpPrefix+"x"), []byte("partial"), 0o644)
	zero := "sha256:" + strings.Repeat("0", 64)
	ld := digestOf(t, l)
	lsize, _ := l.Size()

	for _, tc := range []struct {
		method, path string
		status       int
		code         string // OCI error code expected in the body
	}{
		{"GET", "/v2/", 200, ""},
		{"HEAD", "/v2/", 200, ""},
		{"GET", "/v2/snapshots/p/blobs/" + ld, 200, ""},
		{"HEAD", "/v2/any/repo/blobs/" + ld, 200, ""},
		{"GET", "/v2/snapshots/p/manifests/" + digest, 200, ""},
		{"GET", "/v2/snapshots/p/manifests/p", 200, ""},
		{"GET", "/v2/x/blobs/sha256:../../index.json", 404, "NOT_FOUND"},
		{"GET", "/v2/x/blobs/sha256%2F..%2F..%2Findex.json", 404, "NOT_FOUND"},
		{"GET", "/v2/x/blobs/../../index.json", 404, "NOT_FOUND"},
		{"GET", "/v2/x/blobs/sha256:" + strings.ToUpper(ld[7:]), 400, "DIGEST_INVALID"},
		{"GET", "/v2/x/blobs/sha256:abc", 400, "DIGEST_INVALID"},
		{"GET", "/v2/x/blobs/" + tmpPrefix + "x", 400, "DIGEST_INVALID"},
		{"GET", "/v2/x/blobs/" + zero, 404, "BLOB_UNKNOWN"},
		{"GET", "/v2/x/manifests/" + zero, 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/x/manifests/" + ld, 404, "MANIFEST_UNKNOWN"}, // a layer is no manifest
		{"GET", "/v2/x/manifests/nope", 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/X/blobs/" + ld, 404, "NAME_UNKNOWN"},
		{"GET", "/v2/../blobs/" + ld, 404, "NAME_UNKNOWN"},
		{"GET", "/v2/x/tags/list", 404, "NOT_FOUND"},
		{"GET", "/index.json", 404, "NOT_FOUND"},
		{"PUT", "/v2/x/manifests/v1", 405, "UNSUPPORTED"},
		{"POST", "/v2/x/blobs/uploads/", 405, "UNSUPPORTED"},
		{"DELETE", "/v2/x/blobs/" + ld, 405, "UNSUPPORTED"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://peer"+tc.path, nil)
			rec := httptest.NewRecorder()
			s.PeerHandler().ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.status, rec.Body)
			}
			if tc.code != "" && !strings.Contains(rec.Body.String(), `"code":"`+tc.code+`"`) {
				t.Fatalf("body %s, want code %s", rec.Body, tc.code)
			}
			if tc.status == 200 && strings.Contains(tc.path, "/manifests/") {
				if rec.Header().Get("Docker-Content-Digest") != digest || !strings.Contains(rec.Header().Get("Content-Type"), "manifest") {
					t.Fatalf("manifest headers %v", rec.Header())
				}
			}
			if tc.status == 200 && strings.Contains(tc.path, "/blobs/") && rec.Header().Get("Content-Length") != fmt.Sprint(lsize) {
				t.Fatalf("blob Content-Length %q, want %d", rec.Header().Get("Content-Length"), lsize)
			}
		})
	}
	t.Run("range", func(t *testing.T) {
		req := httptest.NewRequest("GET", "http://peer/v2/x/blobs/"+ld, nil)
		req.Header.Set("Range", "bytes=10-19")
		rec := httptest.NewRecorder()
		s.PeerHandler().ServeHTTP(rec, req)
		if rec.Code != http.StatusPartialContent || rec.Body.Len() != 10 {
			t.Fatalf("range: %d, %d bytes", rec.Code, rec.Body.Len())
		}
	})
}

func TestConcurrentPullsOfImagesSharingLayers(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	shared := []v1.Layer{layer(t, 10, 0, 256*kb), layer(t, 10, 1, 256*kb)}
	var refs []string
	var digests []string
	for i := range 3 {
		ref, d, _ := pushImage(t, r, "snapshots/c", fmt.Sprint("v", i), append(shared, layer(t, 10, 2+i, 64*kb))...)
		refs, digests = append(refs, ref), append(digests, d)
	}
	// An image that is removed and put back while the others pull: its
	// collection must not take the shared layers from under them.
	churn, err := ociregistry.ImageOf(shared[0], layer(t, 10, 9, 4*kb))
	if err != nil {
		t.Fatal(err)
	}
	r.ResetCounters()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 6 {
		wg.Go(func() {
			if _, err := s.Pull(context.Background(), fmt.Sprint("img", i%3), refs[i%3], []Source{registrySource(r)}, PullOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := s.Put(context.Background(), "churn", churn); err != nil {
				errs <- err
			}
			if err := s.Remove("churn"); err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// shared[0] may have come in by Put first.
	if n := r.BlobGetsOf(digestOf(t, shared[0])); n > 1 {
		t.Errorf("shared layer downloaded %d times, want at most once", n)
	}
	if n := r.BlobGetsOf(digestOf(t, shared[1])); n != 1 {
		t.Errorf("shared layer downloaded %d times, want once", n)
	}
	imgs, _ := s.Images()
	if len(imgs) != 3 {
		t.Fatalf("images %+v", imgs)
	}
	var total int64
	seen := map[string]bool{}
	for i, img := range imgs {
		if img.Digest != digests[i] {
			t.Fatalf("image %s has digest %s, want %s", img.Name, img.Digest, digests[i])
		}
		// Every blob of every recorded image is present and verified.
		h, _ := v1.NewHash(img.Digest)
		p, _ := layout.FromPath(s.Dir())
		im, err := p.Image(h)
		if err != nil {
			t.Fatal(err)
		}
		ls, _ := im.Layers()
		for _, l := range ls {
			d, _ := l.Digest()
			rc, err := l.Compressed()
			if err != nil {
				t.Fatalf("%s: layer %s: %v", img.Name, d, err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !seen[d.String()] {
				seen[d.String()] = true
				total += n
			}
		}
	}
	noTemps(t, s)
	if u, _ := s.Usage(); u < total {
		t.Fatalf("Usage() = %d, less than the layers alone (%d)", u, total)
	}
}

func TestOpenRemovesTemporaryFiles(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	ref, digest, _ := pushImage(t, r, "snapshots/t", "v1", layer(t, 11, 0, 16*kb))
	size := pull(t, s, "t", ref, registrySource(r)).Size
	leftovers := []string{
		filepath.Join(s.blobDir(), tmpPrefix+"0123456789abcdef-42"),
		filepath.Join(s.Dir(), tmpPrefix+"index-42"),
	}
	for _, f := range leftovers {
		if err := os.WriteFile(f, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(s.Dir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	noTemps(t, s2)
	if u, _ := s2.Usage(); u != size {
		t.Fatalf("Usage() = %d after reopening, want %d", u, size)
	}
	if img, ok, _ := s2.Image("t"); !ok || img.Digest != digest || img.Size != size {
		t.Fatalf("image after reopening: %+v %v", img, ok)
	}
}

func TestPutThenServe(t *testing.T) {
	s := newStore(t, 0)
	img, err := ociregistry.RandomImage(12, 2, 8*kb)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := s.Put(context.Background(), "built", img)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if digest != want.String() {
		t.Fatalf("Put returned %s, want %s", digest, want)
	}
	info, ok, _ := s.Image("built")
	if !ok || info.Digest != digest {
		t.Fatalf("Image(built) = %+v %v", info, ok)
	}
	other := newStore(t, 0)
	res := pull(t, other, "built", "peer.invalid/built@"+digest, peerSource("s", peerOf(t, s, nil)))
	if res.Size != info.Size || res.Fetched != info.Size {
		t.Fatalf("pull of the put image: %+v, want size %d", res, info.Size)
	}
	// Replacing the image under the same name collects the old one.
	img2, _ := ociregistry.RandomImage(13, 1, 8*kb)
	if _, err := s.Put(context.Background(), "built", img2); err != nil {
		t.Fatal(err)
	}
	if has(s, digest) {
		t.Fatal("replaced image's manifest kept")
	}
	if imgs, _ := s.Images(); len(imgs) != 1 {
		t.Fatalf("images %+v, want one entry per name", imgs)
	}
}

func TestPickPlatform(t *testing.T) {
	r := startRegistry(t)
	mk := func(seed int64, os, arch string) (v1.Image, mutate.IndexAddendum) {
		img, err := ociregistry.ImageOf(layer(t, seed, 0, 4*kb))
		if err != nil {
			t.Fatal(err)
		}
		return img, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: os, Architecture: arch}}}
	}
	here, hereAdd := mk(20, runtime.GOOS, runtime.GOARCH)
	amd, amdAdd := mk(21, "linux", "amd64")
	_, oddAdd := mk(22, "plan9", "mips")
	odd2, odd2Add := mk(23, "plan9", "arm")
	for _, tc := range []struct {
		name string
		adds []mutate.IndexAddendum
		want v1.Image
	}{
		{"this platform", []mutate.IndexAddendum{oddAdd, amdAdd, hereAdd}, here},
		{"linux/amd64 fallback", []mutate.IndexAddendum{oddAdd, amdAdd}, amd},
		{"first fallback", []mutate.IndexAddendum{odd2Add, oddAdd}, odd2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "this platform" && runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
				tc.want = amd // both match; the first listed wins
			}
			idx := mutate.AppendManifests(empty.Index, tc.adds...)
			ref := r.Ref("snapshots/multi", strings.NewReplacer(" ", "-", "/", "-").Replace(tc.name))
			if _, err := r.PushIndex(ref, idx); err != nil {
				t.Fatal(err)
			}
			s := newStore(t, 0)
			res := pull(t, s, "multi", ref, registrySource(r))
			want, _ := tc.want.Digest()
			if res.Digest != want.String() {
				t.Fatalf("picked %s, want %s", res.Digest, want)
			}
		})
	}
}

// TestPullStreams makes the streaming claim falsifiable: pulling a 64 MB
// layer must allocate far less than the layer.
func TestPullStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MB layer")
	}
	r := startRegistry(t)
	s := newStore(t, 0)
	const size = 64 << 20
	ref, _, _ := pushImage(t, r, "snapshots/large", "v1", layer(t, 30, 0, size))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := pull(t, s, "large", ref, registrySource(r))
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("pulled %d bytes allocating %d bytes", res.Fetched, grew)
	if res.Fetched < size {
		t.Fatalf("fetched %d bytes", res.Fetched)
	}
	if grew > 16<<20 {
		t.Fatalf("pull of a %d MB layer allocated %d MB", size>>20, grew>>20)
	}
}
