package ocistore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/infra/errclass"
)

const gib = int64(1) << 30

// crafted stores in the registry a manifest whose layers declare the given
// sizes, whatever the blobs behind them hold (each a distinct small blob of
// the registry, so the store cannot merge them), and returns its
// reference and the layers' digests.
func crafted(t *testing.T, r *ociregistry.Registry, repo string, sizes ...int64) (string, []string) {
	t.Helper()
	cfg := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}`)
	cfgDigest, err := r.PushBlob(repo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(cfg)), Digest: v1.Hash{Algorithm: "sha256", Hex: cfgDigest[7:]}}}
	var digests []string
	for i, size := range sizes {
		d, err := r.PushBlob(repo, fmt.Appendf(nil, "layer %d of %s", i, repo))
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCIUncompressedLayer, Size: size, Digest: v1.Hash{Algorithm: "sha256", Hex: d[7:]}})
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	ref := r.Ref(repo, "v1")
	if _, err := r.PushRaw(ref, raw); err != nil {
		t.Fatal(err)
	}
	return ref, digests
}

// A manifest's declared sizes are checked before anything is reserved or
// fetched: negative ones, ones no runner would take, and sums that would
// overflow. Before, three layers of 2^62 bytes summed to a negative number
// and passed a 1 GiB quota.
func TestHostileManifestSizes(t *testing.T) {
	r := startRegistry(t)
	for _, tc := range []struct {
		name   string
		quota  int64
		max    int64
		sizes  []int64
		class  errclass.Class
		reason string
	}{
		{"three layers of 2^62 bytes against a 1 GiB quota", gib, 0, []int64{1 << 62, 1 << 62, 1 << 62}, errclass.Permanent, "over a limit: image size"},
		{"three layers of 2^62 bytes, no quota", 0, 0, []int64{1 << 62, 1 << 62, 1 << 62}, errclass.Permanent, "over a limit: image size"},
		{"layers whose sum overflows, under the largest image each", 0, 1<<63 - 1, []int64{1<<62 + 1<<61, 1<<62 + 1<<61}, errclass.Permanent, "over a limit: image size"},
		{"a negative size", gib, 0, []int64{-1}, errclass.Permanent, errclass.ReasonInvalidInput},
		{"a layer over the largest image", 0, 10 * gib, []int64{11 * gib}, errclass.Permanent, "over a limit: image size"},
		{"layers over the largest image together", 0, 10 * gib, []int64{6 * gib, 6 * gib}, errclass.Permanent, "over a limit: image size"},
		{"a layer over the quota", gib, 0, []int64{2 * gib}, errclass.Permanent, "exceeds store quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, _ := crafted(t, r, "hostile/"+slug(tc.name), tc.sizes...)
			s, err := OpenWith(t.TempDir(), Options{Quota: tc.quota, MaxImageBytes: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			r.ResetCounters()
			_, err = s.Pull(context.Background(), "hostile", ref, []Source{registrySource(r)}, PullOptions{})
			wantClass(t, err, tc.class, tc.reason)
			if r.BlobGets() != 0 {
				t.Errorf("%d blob requests: a refused manifest fetches nothing", r.BlobGets())
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.reserved) != 0 || len(s.pins) != 0 {
				t.Errorf("reservations %v, pins %v left behind", s.reserved, s.pins)
			}
		})
	}
}

// slug makes a test's name a repository name.
func slug(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}

// blockingBlobs is a source in front of the registry that serves its
// manifests and holds every blob request until the test ends; asked
// receives the first blob request's path.
func blockingBlobs(t *testing.T, r *ociregistry.Registry) (Source, <-chan string) {
	t.Helper()
	asked := make(chan string, 1)
	release := make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: r.Addr()})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.Contains(req.URL.Path, "/blobs/") {
			proxy.ServeHTTP(w, req)
			return
		}
		select {
		case asked <- req.URL.Path:
		default:
		}
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return peerSource("blocking", strings.TrimPrefix(srv.URL, "http://")), asked
}

// While one pull holds its reservation, another is checked against it.
// Before, the bogus manifest's reservation (three layers of 2^62 bytes)
// summed to a negative number, and an honest pull of 2 GiB then passed a
// 1 GiB quota too. A real reservation still counts.
func TestAReservationLetsNoOtherPullPastTheQuota(t *testing.T) {
	r := startRegistry(t)
	for _, tc := range []struct {
		name  string
		first []int64 // the sizes the pull in flight declares
		// firstRefused: the first pull is refused itself.
		firstRefused bool
		second       int64
		want         string
	}{
		{"a bogus manifest's", []int64{1 << 62, 1 << 62, 1 << 62}, true, 2 * gib, "image %s needs 21474"},
		{"an honest pull's", []int64{600 << 20}, false, 600 << 20, "image %s needs 6291"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			firstRef, _ := crafted(t, r, "reserve/first-"+slug(tc.name), tc.first...)
			secondRef, _ := crafted(t, r, "reserve/second-"+slug(tc.name), tc.second)
			s := newStore(t, gib)
			blocking, asked := blockingBlobs(t, r)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := make(chan error, 1)
			go func() {
				_, err := s.Pull(ctx, "first", firstRef, []Source{blocking, registrySource(r)}, PullOptions{})
				first <- err
			}()
			select {
			case <-asked: // the first pull reserved its quota and waits for a blob
				if tc.firstRefused {
					t.Error("the bogus manifest was taken: its pull is fetching blobs")
				}
			case err := <-first:
				if !tc.firstRefused {
					t.Fatalf("the first pull ended: %v", err)
				}
				wantClass(t, err, errclass.Permanent, "over a limit: image size")
			}
			_, err := s.Pull(context.Background(), "second", secondRef, []Source{registrySource(r)}, PullOptions{})
			wantClass(t, err, errclass.Permanent, "exceeds store quota")
			// Nothing in use but what the first pull reserved, if it was taken.
			inUse := " with 0 in use"
			if !tc.firstRefused {
				inUse = " with 6291"
			}
			if want := fmt.Sprintf(tc.want, secondRef); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), inUse) {
				t.Errorf("error %q, want %q ... %q", err, want, inUse)
			}
		})
	}
}

// A source sending more than the manifest declares is cut at the declared
// size: nothing past it is written or counted, and the pull fails for
// that source. Before, one byte more was read, written and reported.
func TestAStreamStopsAtItsDeclaredSize(t *testing.T) {
	t.Run("ingest", func(t *testing.T) {
		s := newStore(t, 0)
		content := bytes.Repeat([]byte("x"), 100<<10)
		h := sha256Sum(content[:64<<10])
		b := blob{digest: fmt.Sprintf("sha256:%x", h), hex: fmt.Sprintf("%x", h), size: 64 << 10}
		var counted int64
		err := s.ingest(bytes.NewReader(content), b, make([]byte, 4<<10), func(n int64) { counted += n })
		var pr *problem
		if !errors.As(err, &pr) || !strings.Contains(pr.what, "longer than declared") {
			t.Fatalf("ingest of a long stream: %v, want a problem 'longer than declared'", err)
		}
		if counted > b.size {
			t.Errorf("%d bytes counted, more than the %d declared", counted, b.size)
		}
		noTemps(t, s)
	})
	t.Run("registry", func(t *testing.T) {
		r := startRegistry(t)
		long := bytes.Repeat([]byte("y"), 100<<10)
		d, err := r.PushBlob("long/blob", long)
		if err != nil {
			t.Fatal(err)
		}
		cfg := []byte(`{"architecture":"amd64","os":"linux"}`)
		cd, err := r.PushBlob("long/blob", cfg)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
			Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(cfg)), Digest: v1.Hash{Algorithm: "sha256", Hex: cd[7:]}},
			Layers: []v1.Descriptor{{MediaType: types.OCIUncompressedLayer, Size: 64 << 10, Digest: v1.Hash{Algorithm: "sha256", Hex: d[7:]}}}})
		ref := r.Ref("long/blob", "v1")
		if _, err := r.PushRaw(ref, raw); err != nil {
			t.Fatal(err)
		}
		s := newStore(t, 0)
		var most, total int64
		_, err = s.Pull(context.Background(), "long", ref, []Source{registrySource(r)}, PullOptions{Progress: func(p Progress) {
			most, total = max(most, p.Done), p.Total
		}})
		wantClass(t, err, errclass.Retryable, "longer than declared")
		if most > total {
			t.Errorf("progress reached %d of %d bytes", most, total)
		}
		if u, _ := s.Usage(); u > int64(len(cfg)) {
			t.Errorf("usage %d: the long blob was stored", u)
		}
		noTemps(t, s)
	})
}
