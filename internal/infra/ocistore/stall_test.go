package ocistore

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/devstack/ociregistry"
)

// hung is a source that accepts connections and answers nothing (or, with
// only set, answers what the wrapped handler answers except the requests
// only matches, which it holds) until the test ends. It counts the
// requests it held.
type hung struct {
	srv  *httptest.Server
	held atomic.Int64
}

func hungSource(t *testing.T, h http.Handler, only func(*http.Request) bool) *hung {
	t.Helper()
	release := make(chan struct{})
	hs := &hung{}
	hs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h != nil && only != nil && !only(r) {
			h.ServeHTTP(w, r)
			return
		}
		hs.held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hs.srv.Close() })
	return hs
}

func (h *hung) addr() string { return strings.TrimPrefix(h.srv.URL, "http://") }

func isBlobGet(r *http.Request) bool { return strings.Contains(r.URL.Path, "/blobs/") }

// A peer that hangs — before answering at all, or in the middle of the
// blobs — is given up within the stall bound, reported as skipped at
// once, and not asked again in that pull: the rest comes from the last
// source, the registry. Before, the manifest GET and the handshake had no
// bound at all, and a peer that stalled on one blob was tried again on
// every next one.
func TestAStalledPeerIsGivenUpForTheRestOfThePull(t *testing.T) {
	const stall = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		only func(*http.Request) bool // nil: hangs on everything
	}{
		{"hangs before answering", nil},
		{"hangs on blobs", isBlobGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRegistry(t)
			a, b := newStore(t, 0), newStore(t, 0)
			_, digest, _ := pushImage(t, r, "snapshots/stall", "v1", layer(t, 40, 0, 64*kb), layer(t, 40, 1, 64*kb), layer(t, 40, 2, 64*kb))
			ref := r.Ref("snapshots/stall", digest)
			pull(t, a, "stall", ref, registrySource(r))
			peer := hungSource(t, a.PeerHandler(), tc.only)
			r.ResetCounters()

			var mu sync.Mutex
			var reports []Progress
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := b.Pull(ctx, "stall", ref, []Source{peerSource("hung", peer.addr()), registrySource(r)}, PullOptions{
				Stall: stall,
				Progress: func(p Progress) {
					mu.Lock()
					reports = append(reports, p)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			// The manifest may have come from the peer before it hung.
			if manifest := int64(len(mustRead(t, b, digest))); res.Digest != digest || res.BySource["peer:hung"] > manifest ||
				res.BySource["registry"] < res.Size-manifest {
				t.Fatalf("result %+v, want every blob from the registry", res)
			}
			// Once by each of the downloads that ran at once when it hung.
			if n := peer.held.Load(); n < 1 || n > ParallelBlobs {
				t.Errorf("the hung peer was asked %d times, want once per download running at once (%d)", n, ParallelBlobs)
			}
			mu.Lock()
			defer mu.Unlock()
			first := slices.IndexFunc(reports, func(p Progress) bool { return len(p.Skipped) > 0 })
			if first < 0 || !slices.Equal(reports[first].Skipped, []string{"peer:hung"}) {
				t.Fatalf("no progress report names the skipped peer: %+v", reports)
			}
			if last := reports[len(reports)-1]; !slices.Equal(last.Skipped, []string{"peer:hung"}) || last.Done != res.Size {
				t.Errorf("last report %+v, want done with the peer skipped", last)
			}
		})
	}
}

// The last source is every blob's fallback: a registry that stalls fails
// the pull (Retryable), it is not skipped into having no source at all.
func TestTheLastSourceIsNeverSkipped(t *testing.T) {
	r := startRegistry(t)
	s := newStore(t, 0)
	_, digest, _ := pushImage(t, r, "snapshots/last", "v1", layer(t, 41, 0, 16*kb))
	reg := hungSource(t, r, isBlobGet)
	var skipped []string
	_, err := s.Pull(context.Background(), "last", reg.addr()+"/snapshots/last@"+digest,
		[]Source{{Name: "registry", Registry: reg.addr(), Insecure: true, Anonymous: true}},
		PullOptions{Stall: 200 * time.Millisecond, Progress: func(p Progress) { skipped = p.Skipped }})
	wantClass(t, err, "Retryable", "stalled")
	if len(skipped) != 0 {
		t.Errorf("skipped %v, want the only source kept", skipped)
	}
}

// gate serves one blob's body a chunk at a time, each when the test says.
type gate struct {
	digest  string
	chunk   int
	next    chan struct{} // one receive per chunk
	started chan struct{} // closed when the body starts
	once    sync.Once
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/blobs/"+g.digest) {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&gatedWriter{ResponseWriter: w, g: g, ctx: r.Context()}, r)
	})
}

type gatedWriter struct {
	http.ResponseWriter
	g   *gate
	ctx context.Context
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		w.g.once.Do(func() { close(w.g.started) })
		select {
		case <-w.g.next:
		case <-w.ctx.Done():
			return n, w.ctx.Err()
		}
		c := p[:min(len(p), w.g.chunk)]
		m, err := w.ResponseWriter.Write(c)
		n += m
		if err != nil {
			return n, err
		}
		http.NewResponseController(w.ResponseWriter).Flush()
		p = p[m:]
	}
	return n, nil
}

// A pull waiting for a blob another pull is downloading reports that
// download's bytes as they come, so that its watcher (an activity's
// heartbeat) sees progress, not silence, for as long as the other pull
// moves. Before, the wait said nothing until the blob was complete.
func TestAPullWaitingOnAnotherPullsBlobReportsItsProgress(t *testing.T) {
	r := startRegistry(t)
	origin, s := newStore(t, 0), newStore(t, 0)
	big := layer(t, 42, 0, 256*kb)
	_, digest, _ := pushImage(t, r, "snapshots/shared", "v1", big)
	ref := r.Ref("snapshots/shared", digest)
	pull(t, origin, "shared", ref, registrySource(r))
	g := &gate{digest: digestOf(t, big), chunk: 32 * kb, next: make(chan struct{}), started: make(chan struct{})}
	src := peerSource("gated", peerOf(t, origin, g.wrap))

	first := make(chan error, 1)
	go func() {
		_, err := s.Pull(context.Background(), "one", ref, []Source{src}, PullOptions{})
		first <- err
	}()
	g.next <- struct{}{} // the first chunk: the first pull is now streaming the layer
	<-g.started

	reports := make(chan Progress, 64)
	second := make(chan error, 1)
	go func() {
		_, err := s.Pull(context.Background(), "two", ref, []Source{src}, PullOptions{Progress: func(p Progress) {
			select {
			case reports <- p:
			default:
			}
		}})
		second <- err
	}()
	// Release the layer a chunk at a time; after each, the waiting pull
	// must report more bytes before the next one is sent.
	size, _ := big.Size()
	var seen int64
	timeout := time.After(time.Minute)
	for sent := int64(32 * kb); sent < size; {
		select {
		case p := <-reports:
			if p.Done <= seen {
				continue
			}
			seen = p.Done
			g.next <- struct{}{}
			sent += 32 * kb
		case err := <-second:
			t.Fatalf("the second pull ended (%v) before the layer was complete", err)
		case <-timeout:
			t.Fatalf("the waiting pull reported nothing new past %d bytes while the other pull received %d of %d", seen, sent, size)
		}
	}
	for range 16 { // the rest of the body, if any
		select {
		case g.next <- struct{}{}:
		default:
		}
	}
	close(g.next)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// A transfer that stops mid-blob leaves the pull's watcher with every byte
// it received: the report the 100 ms interval held back is delivered once
// the interval has passed, though no byte follows. Before, the bytes after
// the last report that was due went unreported until the stall bound, and
// a runner killed meanwhile could not count them.
func TestProgressReportsTheLastBytesBeforeATransferStops(t *testing.T) {
	reg := startRegistry(t)
	// Sent in 32 KiB steps, many within one interval: the last step before
	// the hold is most likely inside an interval already reported.
	reg.SetRate(1 << 20)
	const held = 300 << 10
	l := layer(t, 71, 0, 1<<20)
	img, err := ociregistry.ImageOf(l)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	ref, _, blobs := pushImage(t, reg, "hold/img", "v1", l)
	reg.HoldAfter(blobs[1], held, 1)
	s := newStore(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var last Progress
	reached := make(chan struct{})
	var once sync.Once
	go func() {
		_, _ = s.Pull(ctx, "hold", ref, []Source{registrySource(reg)}, PullOptions{Stall: time.Hour, Progress: func(p Progress) {
			mu.Lock()
			defer mu.Unlock()
			last = p
			// The config stored, and the layer to the held byte.
			if p.Done == m.Config.Size+held {
				once.Do(func() { close(reached) })
			}
		}})
	}()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the last report says %+v: the %d bytes of the layer sent before the hold (%d sent) were never all reported",
			last, held, reg.BlobBytesOf(blobs[1]))
	}
}
