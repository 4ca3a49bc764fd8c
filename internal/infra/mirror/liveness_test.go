package mirror

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/infra/liveness"
)

// throttled forwards to target, and shapes the answer to upload-pack (the
// pack): hang sends the headers and then nothing until the client goes;
// otherwise the body goes out in small pieces with a pause between them.
type throttled struct {
	proxy *httputil.ReverseProxy
	hang  bool
	gone  chan struct{} // closed when a hung request's client went away
}

func newThrottled(t *testing.T, target string, hang bool) *httptest.Server {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	th := &throttled{proxy: httputil.NewSingleHostReverseProxy(u), hang: hang, gone: make(chan struct{})}
	srv := httptest.NewServer(th)
	t.Cleanup(srv.Close)
	return srv
}

func (th *throttled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
		th.proxy.ServeHTTP(w, r)
		return
	}
	if th.hang {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(th.gone)
		return
	}
	rec := httptest.NewRecorder()
	th.proxy.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	body := rec.Body.Bytes()
	for len(body) > 0 {
		n := min(256, len(body))
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		body = body[n:]
		time.Sleep(20 * time.Millisecond) // a slow link, not a test's wait
	}
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
	var beats atomic.Int64
	ctx, stop := liveness.Watch(context.Background(), quick, func() { beats.Add(1) })
	defer stop()
	start := time.Now()
	if _, err := m.Sync(ctx, srv.URL+"/acme/app.git"); err != nil {
		t.Fatalf("slow sync: %v (cause %v)", err, context.Cause(ctx))
	}
	if took := time.Since(start); took < quick.Stall {
		t.Fatalf("the fetch took %v, under the stall bound %v: it proves nothing; send a bigger pack", took, quick.Stall)
	}
	if liveness.From(ctx).Bytes() == 0 || beats.Load() == 0 {
		t.Fatalf("received %d bytes, %d beats; want both counted", liveness.From(ctx).Bytes(), beats.Load())
	}
}
