package ocistore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/infra/errclass"
)

// A runner serves what it is still pulling: a peer follows a blob while the
// runner receives it from the registry, so the registry sends one copy for
// both. Every byte but the last is served as it arrives; the last only
// once the runner has checked the whole blob's digest. A blob that fails
// that check (the registry sent one flipped byte) is cut off: the peer
// never receives a complete copy of it, stores nothing of it, and takes the
// blob from its next source; so does one cut short. The registry holds the layer at a known byte
// (PauseAt) until the peer has received every byte before it: the test
// waits on events, not on time. Before, a peer served only the complete
// images it held, and a runner asked for one it was pulling answered 404.
func TestAPeerServesWhatItVerifiedWhileStillPulling(t *testing.T) {
	const pauseAt = 100 * kb
	for _, tc := range []struct {
		name string
		end  ociregistry.Paused
		want string // a's failure; "" none
	}{
		{"whole", ociregistry.Resumed, ""},
		{"corrupted", ociregistry.Corrupted, "digest mismatch"},
		{"truncated", ociregistry.Cut, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRegistry(t)
			l := layer(t, 77, 0, 256*kb)
			_, digest, blobs := pushImage(t, r, "snapshots/pipe", "v1", l)
			cfgSize := configSize(t, l)
			size, err := l.Size()
			if err != nil {
				t.Fatal(err)
			}
			ref := r.Ref("snapshots/pipe", digest)
			cfg, lay := blobs[0], blobs[1]
			release := r.PauseAt(lay, pauseAt, tc.end)
			t.Cleanup(release)
			a, b := newStore(t, 0), newStore(t, 0)
			srv := httptest.NewServer(a.PeerHandler())
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			begun := make(chan struct{})
			var once sync.Once
			aDone := make(chan error, 1)
			go func() {
				_, err := a.Pull(ctx, "pipe", ref, []Source{registrySource(r)}, PullOptions{Progress: func(p Progress) {
					if p.Total > 0 {
						once.Do(func() { close(begun) })
					}
				}})
				aDone <- err
			}()
			select {
			case <-begun:
			case err := <-aDone:
				t.Fatalf("a's pull ended before it began: %v", err)
			}

			var mu sync.Mutex
			var fromA int64
			following := make(chan struct{})
			var fOnce sync.Once
			bDone := make(chan PullResult, 1)
			bErr := make(chan error, 1)
			go func() {
				res, err := b.Pull(ctx, "pipe", ref, []Source{peerSource("a", strings.TrimPrefix(srv.URL, "http://")), registrySource(r)},
					PullOptions{Stall: 30 * time.Second, Progress: func(p Progress) {
						mu.Lock()
						fromA = p.Received["peer:a"]
						mu.Unlock()
						// manifest, config and the layer to the pause
						if p.Received["peer:a"] > cfgSize+pauseAt {
							fOnce.Do(func() { close(following) })
						}
					}})
				bErr <- err
				bDone <- res
			}()
			// b has every byte a received so far: a serves its pull in
			// progress.
			select {
			case <-following:
			case err := <-bErr:
				t.Fatalf("b's pull ended before it followed a's: %v", err)
			}
			if has(b, lay) {
				t.Fatal("b stored the layer before a had it whole")
			}
			release()

			aErr := <-aDone
			if err := <-bErr; err != nil {
				t.Fatalf("b's pull: %v", err)
			}
			res := <-bDone
			verifyBlobs(t, a)
			verifyBlobs(t, b)
			noTemps(t, a)
			noTemps(t, b)
			if !has(b, lay) || !has(b, cfg) {
				t.Fatal("b does not hold the image")
			}
			mu.Lock()
			defer mu.Unlock()
			manifest := int64(len(mustRead(t, b, digest)))
			if tc.want == "" {
				if aErr != nil {
					t.Fatalf("a's pull: %v", aErr)
				}
				// One copy from the registry for both, by its counters.
				if sent, gets := r.BlobBytesOf(lay), r.BlobGetsOf(lay); sent != size || gets != 1 {
					t.Errorf("the registry sent the layer %d times (%d bytes), want once (%d)", gets, sent, size)
				}
				if res.BySource["peer:a"] != manifest+cfgSize+size || res.BySource["registry"] != 0 {
					t.Errorf("b's blobs came from %v, want every one from a", res.BySource)
				}
				return
			}
			// The flipped byte, the cut: a refused the layer and stored
			// nothing of it.
			wantClass(t, aErr, errclass.Retryable, tc.want)
			if has(a, lay) {
				t.Error("a stored a layer that does not match its digest")
			}
			// a never sent b the last byte of the layer it had not
			// verified: b got it from the registry, which it verified.
			if fromA > manifest+cfgSize+size-1 {
				t.Errorf("b received %d bytes from a, more than manifest and config (%d) and all but the last byte of the layer (%d)", fromA, manifest+cfgSize, size-1)
			}
			if served := a.ServedBytes(); served >= manifest+cfgSize+size {
				t.Errorf("a served %d bytes: the whole unverified layer went out", served)
			}
			if res.BySource["registry"] != size {
				t.Errorf("b's layer came from %v, want the registry", res.BySource)
			}
		})
	}
}

// configSize is the size of the config of an image of layers.
func configSize(t *testing.T, layers ...v1.Layer) int64 {
	t.Helper()
	img, err := ociregistry.ImageOf(layers...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Config.Size
}

// verifyBlobs fails if a stored blob's content does not match its name.
func verifyBlobs(t *testing.T, s *Store) {
	t.Helper()
	ents, err := os.ReadDir(s.blobDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !isHex(e.Name()) {
			continue
		}
		data, err := os.ReadFile(s.blobPath(e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != e.Name() {
			t.Errorf("blob %s holds content of digest %s", e.Name(), got)
		}
	}
}
