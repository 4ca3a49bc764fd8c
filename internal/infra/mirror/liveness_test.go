package mirror

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/infra/liveness"
)

// throttled forwards to target and remembers each answer by request, so
// that a request seen before is answered from memory, whatever the load on
// the machine. It shapes the answer to upload-pack (the pack): hang sends
// the headers and then nothing until the client goes; otherwise the body
// goes out in pieces (about 30) with pause between them.
type throttled struct {
	proxy *httputil.ReverseProxy
	hang  bool
	gone  chan struct{} // closed when a hung request's client went away

	mu      sync.Mutex
	pause   time.Duration
	answers map[string]*httptest.ResponseRecorder
	misses  int // requests forwarded to target
}

func newThrottled(t *testing.T, target string, hang bool) *httptest.Server {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	th := &throttled{proxy: httputil.NewSingleHostReverseProxy(u), hang: hang, gone: make(chan struct{}),
		answers: map[string]*httptest.ResponseRecorder{}}
	srv := httptest.NewServer(th)
	t.Cleanup(srv.Close)
	return srv
}

func (th *throttled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pack := strings.HasSuffix(r.URL.Path, "/git-upload-pack")
	if pack && th.hang {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(th.gone)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	key := r.Method + " " + r.URL.RequestURI() + "\n" + string(body)
	th.mu.Lock()
	rec, seen := th.answers[key]
	pause := th.pause
	th.mu.Unlock()
	if !seen {
		rec = httptest.NewRecorder()
		r.Body = io.NopCloser(bytes.NewReader(body))
		th.proxy.ServeHTTP(rec, r)
		th.mu.Lock()
		th.answers[key], th.misses = rec, th.misses+1
		th.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	answer := rec.Body.Bytes()
	piece := len(answer)
	if pack && pause > 0 {
		piece = max(1, len(answer)/30)
	}
	for len(answer) > 0 {
		n := min(piece, len(answer))
		if _, err := w.Write(answer[:n]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		answer = answer[n:]
		if pack && len(answer) > 0 {
			time.Sleep(pause) // a slow link, not a test's wait
		}
	}
}

// slow sets the pause between pieces of a pack and returns how many
// requests have been forwarded to the target so far.
func (th *throttled) slow(pause time.Duration) (misses int) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.pause = pause
	return th.misses
}

var quick = liveness.Bounds{Every: 10 * time.Millisecond, Stall: 150 * time.Millisecond}

// A fetch whose remote goes silent is given up by its watch, which cancels
// the connection (the server sees its client go), instead of hanging to
// the activity's start-to-close timeout.
func TestHungFetchIsGivenUp(t *testing.T) {
	fg, m := setup(t)
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, fg, "acme", "app", "a.txt")
	srv := newThrottled(t, fg.URL(), true)
	var beats atomic.Int64
	ctx, stop := liveness.Watch(context.Background(), quick, func() { beats.Add(1) })
	defer stop()
	_, err := m.Sync(ctx, srv.URL+"/acme/app.git")
	var stall *liveness.StallError
	if err == nil || !errors.As(context.Cause(ctx), &stall) {
		t.Fatalf("sync = %v, cause %v; want the stall to give it up", err, context.Cause(ctx))
	}
	select {
	case <-srv.Config.Handler.(*throttled).gone:
	case <-time.After(time.Minute):
		t.Fatal("the hung request was never cancelled")
	}
}

// A slow fetch that keeps sending is alive however long it takes in all:
// the watch beats on bytes received.
func TestSlowFetchIsAlive(t *testing.T) {
	fg, m := setup(t)
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for i := range 200 {
		files[strings.Repeat("d", i%7+1)+"/"+string(rune('a'+i%26))+strings.Repeat("x", i)] = strings.Repeat("payload ", 50+i)
	}
	if _, err := fg.Commit("acme", "app", "main", files, "many files"); err != nil {
		t.Fatal(err)
	}
	srv := newThrottled(t, fg.URL(), false)
	th := srv.Config.Handler.(*throttled)
	// A first sync from another worker's mirrors has the proxy remember
	// every answer, so the watched sync waits on no server work (building
	// the pack under load took longer than a stall bound): only on the link.
	other, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Sync(context.Background(), srv.URL+"/acme/app.git"); err != nil {
		t.Fatal(err)
	}
	bounds := liveness.Bounds{Every: 20 * time.Millisecond, Stall: time.Second}
	forwarded := th.slow(bounds.Stall / 10) // 30 pieces: three stall bounds in all, a tenth of one each
	var beats atomic.Int64
	ctx, stop := liveness.Watch(context.Background(), bounds, func() { beats.Add(1) })
	defer stop()
	start := time.Now()
	if _, err := m.Sync(ctx, srv.URL+"/acme/app.git"); err != nil {
		t.Fatalf("slow sync: %v (cause %v)", err, context.Cause(ctx))
	}
	if th.slow(0) != forwarded {
		t.Fatal("the watched sync asked the forge something the first did not: its answers depend on the load")
	}
	if took := time.Since(start); took < bounds.Stall {
		t.Fatalf("the fetch took %v, under the stall bound %v: it proves nothing; send a bigger pack", took, bounds.Stall)
	}
	if liveness.From(ctx).Bytes() == 0 || beats.Load() == 0 {
		t.Fatalf("received %d bytes, %d beats; want both counted", liveness.From(ctx).Bytes(), beats.Load())
	}
}
