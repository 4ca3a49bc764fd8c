package forge

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rateWindow is the length of GitHub's primary rate-limit window.
const rateWindow = time.Hour

// rateLimiter models GitHub's primary ("core") rate limit: a number of API
// requests per window. Every API request takes one unit; once the window is
// used up, API requests get the rate-limit 403 until the window resets.
type rateLimiter struct {
	mu    sync.Mutex
	limit int
	used  int
	reset time.Time // end of the current window
}

// rateState is what one request learnt about the limit.
type rateState struct {
	limit, remaining, used int
	reset                  time.Time
	exceeded               bool
}

func (l *rateLimiter) init(limit int) {
	l.limit = limit
}

func (l *rateLimiter) roll(now time.Time) {
	if l.reset.IsZero() || !now.Before(l.reset) {
		l.used = 0
		l.reset = now.Add(rateWindow).Truncate(time.Second)
	}
}

func (l *rateLimiter) state() rateState {
	s := rateState{limit: l.limit, used: min(l.used, l.limit), reset: l.reset}
	s.remaining = l.limit - s.used
	s.exceeded = l.used > l.limit
	return s
}

// take consumes one request.
func (l *rateLimiter) take() rateState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(time.Now())
	l.used++
	return l.state()
}

// peek reports the state without consuming (GET /rate_limit is free).
func (l *rateLimiter) peek() rateState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(time.Now())
	return l.state()
}

func (l *rateLimiter) resetWindow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reset = time.Time{}
	l.roll(time.Now())
}

func (s rateState) setHeaders(h http.Header) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(s.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.reset.Unix(), 10))
	h.Set("X-RateLimit-Used", strconv.Itoa(s.used))
	h.Set("X-RateLimit-Resource", "core")
}

// rates are the primary rate limits, one per credential, as on GitHub
// (per token; anonymous requests share one, where GitHub counts per IP).
type rates struct {
	mu    sync.Mutex
	limit int
	by    map[string]*rateLimiter
}

func (r *rates) init(limit int) { r.limit, r.by = limit, map[string]*rateLimiter{} }

// of returns the limiter of a credential ("" for anonymous requests).
func (r *rates) of(cred string) *rateLimiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.by[cred]
	if !ok {
		l = &rateLimiter{}
		l.init(r.limit)
		r.by[cred] = l
	}
	return l
}

// refund gives back a request (a 304 costs no quota on GitHub).
func (l *rateLimiter) refund() rateState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used > 0 {
		l.used--
	}
	return l.state()
}

// ResetRateLimit starts a fresh rate-limit window with the full limit, for
// every credential.
func (f *Forge) ResetRateLimit() {
	f.rates.mu.Lock()
	ls := make([]*rateLimiter, 0, len(f.rates.by))
	for _, l := range f.rates.by {
		ls = append(ls, l)
	}
	f.rates.mu.Unlock()
	for _, l := range ls {
		l.resetWindow()
	}
}

// RateRemaining is what is left of a token's primary limit ("" for
// anonymous requests).
func (f *Forge) RateRemaining(token string) int { return f.rates.of(token).peek().remaining }

func isRateLimitEndpoint(path string) bool {
	return strings.TrimSuffix(path, "/") == apiPrefix+"rate_limit"
}
