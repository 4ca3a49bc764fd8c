package ocistore

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/time/rate"
)

// Token is the peer port's shared secret. It prints as "[redacted]"
// however it is formatted or marshalled, so that a Source or PeerAccess in
// a log line or an error does not carry it.
type Token string

func (Token) String() string               { return "[redacted]" }
func (Token) GoString() string             { return `"[redacted]"` }
func (Token) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }
func (t Token) equal(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(presented)) == 1
}

// peerUser is the user name a runner presents with the token (HTTP basic
// authentication); the server checks the password only.
const peerUser = "gitfleet-runner"

// PeerAccess guards the peer port (architecture §11): who may read it and
// how much each client may take. The zero value guards nothing.
type PeerAccess struct {
	// Token, when set, is required of every request, as the password of
	// HTTP basic authentication or as a bearer token; a request without it
	// gets 401 and a Basic challenge, which is what the pulling side's
	// registry client expects. Every runner of a fleet shares it.
	Token Token
	// ClientRequests bounds the requests one client address has in flight
	// (0: unbounded); one more gets 429 with Retry-After, and a pulling
	// runner goes to the registry instead.
	ClientRequests int
	// ClientRate bounds the bytes a second sent to one client address, and
	// Rate those sent to all clients together (0: unbounded), so that one
	// peer cannot take the whole link, nor serving starve the runner's own
	// work.
	ClientRate, Rate int64
}

// PeerServer is PeerHandler behind a's checks and limits.
func (s *Store) PeerServer(a PeerAccess) http.Handler { return guard(a, s.PeerHandler()) }

func guard(a PeerAccess, next http.Handler) *peerGuard {
	g := &peerGuard{a: a, next: next, clients: map[string]*peerClient{}}
	if a.Rate > 0 {
		g.total = newLimiter(a.Rate)
	}
	return g
}

type peerGuard struct {
	a     PeerAccess
	next  http.Handler
	total *rate.Limiter

	mu      sync.Mutex
	clients map[string]*peerClient // by client address, while it has requests in flight
}

// peerClient is one client address with requests in flight.
type peerClient struct {
	active int
	lim    *rate.Limiter // nil: no per-client rate
}

// throttleBurst is the most bytes a limiter lets through at once.
const throttleBurst = 1 << 20

func newLimiter(bytesPerSecond int64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(bytesPerSecond), int(min(bytesPerSecond, throttleBurst)))
}

func (g *peerGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.a.Token != "" && !g.authorized(r) {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.Header().Set("WWW-Authenticate", `Basic realm="gitfleet peer"`)
		ociError(w, http.StatusUnauthorized, "UNAUTHORIZED", "this peer serves runners of its fleet only")
		return
	}
	c, release := g.enter(r)
	if c == nil {
		w.Header().Set("Retry-After", "1")
		ociError(w, http.StatusTooManyRequests, "TOOMANYREQUESTS", "too many requests from this address at once")
		return
	}
	defer release()
	var lims []*rate.Limiter
	if c.lim != nil {
		lims = append(lims, c.lim)
	}
	if g.total != nil {
		lims = append(lims, g.total)
	}
	if len(lims) > 0 {
		w = &throttledWriter{ResponseWriter: w, lims: lims, ctx: r.Context()}
	}
	g.next.ServeHTTP(w, r)
}

// authorized reports whether r carries the token, as a basic password or
// a bearer token.
func (g *peerGuard) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
		return g.a.Token.equal(tok)
	}
	if enc, ok := strings.CutPrefix(h, "Basic "); ok {
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return false
		}
		_, pass, ok := strings.Cut(string(raw), ":")
		return ok && g.a.Token.equal(pass)
	}
	return false
}

// enter counts a request of r's client, or returns nil when the client
// has ClientRequests in flight already.
func (g *peerGuard) enter(r *http.Request) (*peerClient, func()) {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.clients[addr]
	if c == nil {
		if len(g.clients) >= maxIdleClients {
			g.forgetIdleLocked()
		}
		c = &peerClient{}
		if g.a.ClientRate > 0 {
			c.lim = newLimiter(g.a.ClientRate)
		}
		g.clients[addr] = c
	}
	if g.a.ClientRequests > 0 && c.active >= g.a.ClientRequests {
		return nil, nil
	}
	c.active++
	return c, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		// An idle client is forgotten once its limiter is full again: a
		// new one would let no more through.
		if c.active--; c.active == 0 && c.rested() {
			delete(g.clients, addr)
		}
	}
}

// maxIdleClients bounds the clients kept for their rate while idle.
const maxIdleClients = 1024

// forgetIdleLocked drops the clients with nothing in flight: first those
// whose limiter is full again, then, if that was not enough, every idle
// one (many addresses at once: each then starts with a full burst).
func (g *peerGuard) forgetIdleLocked() {
	for addr, c := range g.clients {
		if c.active == 0 && c.rested() {
			delete(g.clients, addr)
		}
	}
	if len(g.clients) < maxIdleClients {
		return
	}
	for addr, c := range g.clients {
		if c.active == 0 {
			delete(g.clients, addr)
		}
	}
}

// rested reports whether the client's limiter would let a full burst
// through: forgetting it then changes nothing.
func (c *peerClient) rested() bool {
	return c.lim == nil || c.lim.Tokens() >= float64(c.lim.Burst())
}

// throttledWriter meters a response through limiters, in chunks no larger
// than their burst.
type throttledWriter struct {
	http.ResponseWriter
	lims []*rate.Limiter
	ctx  context.Context
}

func (w *throttledWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *throttledWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p
		for _, l := range w.lims {
			chunk = chunk[:min(len(chunk), l.Burst())]
		}
		for _, l := range w.lims {
			if err := l.WaitN(w.ctx, len(chunk)); err != nil {
				return n, err
			}
		}
		m, err := w.ResponseWriter.Write(chunk)
		n += m
		if err != nil {
			return n, err
		}
		p = p[len(chunk):]
	}
	return n, nil
}
