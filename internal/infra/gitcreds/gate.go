package gitcreds

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/metrics"
)

// gate holds one installation's API limits for the whole process, as
// vcs.Account's gate does for a user's token (§6): at most slots requests
// in flight, and none while a rate limit holds — the quota is the
// installation's, whichever of its tokens spent it.
type gate struct {
	slots chan struct{}
	now   func() time.Time

	mu           sync.Mutex
	blockedUntil time.Time
}

func newGate(n int, now func() time.Time) *gate {
	return &gate{slots: make(chan struct{}, n), now: now}
}

// enter waits for a slot, or fails Retryable while a rate limit holds.
func (g *gate) enter(ctx context.Context) (leave func(), err error) {
	g.mu.Lock()
	wait := g.blockedUntil.Sub(g.now())
	g.mu.Unlock()
	if wait > 0 {
		metrics.GitHubRateLimitWaits.Inc()
		return nil, &errclass.Error{Class: errclass.Retryable, Reason: errclass.ReasonRateLimited, RetryAfter: wait,
			Err: fmt.Errorf("the App's installation is rate limited for another %s; no request sent", wait.Round(time.Second))}
	}
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// observe holds every later request while the answer says a limit holds:
// X-RateLimit-Remaining 0 until X-RateLimit-Reset, or Retry-After (a
// secondary limit; a minute when it says nothing).
func (g *gate) observe(resp *http.Response) {
	if resp == nil || (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests) {
		return
	}
	var until time.Time
	now := g.now()
	switch {
	case resp.Header.Get("Retry-After") != "":
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		until = now.Add(time.Duration(max(s, 1)) * time.Second)
	case resp.Header.Get("X-RateLimit-Remaining") == "0":
		reset, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
		until = time.Unix(reset, 0)
		if !until.After(now) {
			until = now.Add(time.Minute)
		}
	case resp.StatusCode == http.StatusTooManyRequests:
		until = now.Add(time.Minute)
	default:
		return
	}
	g.mu.Lock()
	if until.After(g.blockedUntil) {
		g.blockedUntil = until
	}
	g.mu.Unlock()
}

// do runs one go-github call within the gate.
func (g *gate) do(ctx context.Context, send func() (*github.Response, error)) error {
	leave, err := g.enter(ctx)
	if err != nil {
		return err
	}
	resp, err := send()
	leave()
	if resp != nil {
		g.observe(resp.Response)
	}
	return err
}

// gatedTransport sends an installation's API requests through its gate.
type gatedTransport struct {
	gate *gate
	base http.RoundTripper
}

func (t gatedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	leave, err := t.gate.enter(r.Context())
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	defer leave()
	resp, err := t.base.RoundTrip(r)
	t.gate.observe(resp)
	return resp, err
}
