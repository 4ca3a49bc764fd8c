package forge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Forge.
type Options struct {
	// Dir is where the forge keeps its bare repositories (Dir/repos/<id>.git)
	// and its scratch files (Dir/tmp). Required; tests pass t.TempDir().
	Dir string
	// Addr is the listen address used by Start. Default "127.0.0.1:0".
	Addr string
	// Token, if set, is the one credential that unlocks private repositories.
	// When it is empty, credentials are ignored and every request is anonymous.
	Token string
	// RateLimit is the number of API requests allowed per one-hour window,
	// reported in the X-RateLimit-* headers and enforced like GitHub's primary
	// rate limit. Default 5000.
	RateLimit int
	// RequestLogSize is how many requests Requests() keeps (the most recent
	// ones). Default 10000.
	RequestLogSize int
	// TokenLifetime is how long an App's installation access tokens last.
	// Default DefaultTokenLifetime (an hour, as on GitHub).
	TokenLifetime time.Duration
	// Now is the clock that App JWTs and installation tokens are checked
	// against; nil means time.Now.
	Now func() time.Time
	// Logf, if set, receives diagnostics (git stderr, internal errors).
	Logf func(format string, args ...any)
}

// Forge is a GitHub-compatible test server. Create one with Start (listening)
// or New (not listening, for mounting Handler elsewhere). All methods are safe
// for concurrent use.
type Forge struct {
	opts        Options
	reposDir    string
	tmpDir      string
	gitPath     string
	backendPath string

	reg    registry
	faults faultSet
	stats  stats
	rates  rates
	acct   accounts
	hooks  hookState // App webhooks (webhooks.go)
	// scanning holds code scanning's uploads and alerts (codescanning.go).
	scanning codeScanning
	// changed is when users, organizations or memberships last changed
	// (Unix seconds), for Last-Modified.
	changed atomic.Int64

	handler    http.Handler
	requestIDs atomic.Int64 // X-GitHub-Request-Id

	// lifecycle
	closeMu   sync.RWMutex
	closed    bool
	active    sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	srv       *http.Server
	ln        net.Listener
	url       string
}

// New creates a Forge without listening. Use Handler to serve it (for
// example with httptest.NewServer); URL, Host, APIURL and CloneURL are empty
// for a Forge that was not started with Start.
func New(opts Options) (*Forge, error) {
	if opts.Dir == "" {
		return nil, errors.New("forge: Options.Dir is required")
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.RateLimit <= 0 {
		opts.RateLimit = 5000
	}
	if opts.RequestLogSize <= 0 {
		opts.RequestLogSize = 10000
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("forge: %w", err)
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("forge: git not found: %w", err)
	}
	out, err := exec.Command(gitPath, "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("forge: git --exec-path: %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("forge: git http-backend not found: %w", err)
	}
	f := &Forge{
		opts:        opts,
		reposDir:    filepath.Join(dir, "repos"),
		tmpDir:      filepath.Join(dir, "tmp"),
		gitPath:     gitPath,
		backendPath: backend,
	}
	for _, d := range []string{f.reposDir, f.tmpDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("forge: %w", err)
		}
	}
	f.reg.init()
	f.stats.init(opts.RequestLogSize)
	f.rates.init(opts.RateLimit)
	f.acct.init()
	f.touch()
	f.handler = http.HandlerFunc(f.serveHTTP)
	return f, nil
}

// Start creates a Forge and serves it on Options.Addr in the background.
func Start(opts Options) (*Forge, error) {
	f, err := New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("forge: listen: %w", err)
	}
	f.ln = ln
	f.url = "http://" + ln.Addr().String()
	f.srv = &http.Server{
		Handler:           f.handler,
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		if err := f.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.logf("forge: serve: %v", err)
		}
	}()
	return f, nil
}

// Close stops the server (if started), waits for in-flight requests and
// removes the forge's scratch directory. Repositories stay on disk under
// Options.Dir. Close is idempotent.
func (f *Forge) Close() error {
	f.closeOnce.Do(func() {
		f.closeMu.Lock()
		f.closed = true
		f.closeMu.Unlock()
		if f.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := f.srv.Shutdown(ctx)
			cancel()
			if err != nil {
				// Connections still busy after the grace period: cut them,
				// which makes their handlers (and git children) finish.
				_ = f.srv.Close()
			}
		}
		f.active.Wait()
		f.closeErr = os.RemoveAll(f.tmpDir)
	})
	return f.closeErr
}

// URL is the forge's origin, e.g. "http://127.0.0.1:PORT".
func (f *Forge) URL() string { return f.url }

// Host is the forge's host:port.
func (f *Forge) Host() string { return strings.TrimPrefix(f.url, "http://") }

// APIURL is the REST API base URL with a trailing slash, as go-github's
// WithEnterpriseURLs expects: URL()+"/api/v3/".
func (f *Forge) APIURL() string {
	if f.url == "" {
		return ""
	}
	return f.url + "/api/v3/"
}

// CloneURL is the smart-HTTP clone URL URL()+"/owner/name.git".
func (f *Forge) CloneURL(owner, name string) string {
	if f.url == "" {
		return ""
	}
	return f.url + "/" + owner + "/" + name + ".git"
}

// Handler serves the whole forge (API and git). It is what Start serves and
// can also be mounted elsewhere; URLs in responses are built from the
// request's Host.
func (f *Forge) Handler() http.Handler { return f.handler }

func (f *Forge) logf(format string, args ...any) {
	if f.opts.Logf != nil {
		f.opts.Logf(format, args...)
	}
}

// serveHTTP is the single entry point: classify, count, log, apply faults,
// then dispatch to the API or git side.
func (f *Forge) serveHTTP(w http.ResponseWriter, r *http.Request) {
	f.closeMu.RLock()
	if f.closed {
		f.closeMu.RUnlock()
		http.Error(w, "forge is closed", http.StatusServiceUnavailable)
		return
	}
	f.active.Add(1)
	f.closeMu.RUnlock()
	defer f.active.Done()

	kind := classify(r.URL.Path)
	f.stats.count(kind)
	rec := &recorder{ResponseWriter: w, done: func(status int) {
		f.stats.log(Request{Kind: kind, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: status})
	}}
	defer rec.finish()

	var rs rateState
	if kind == API {
		limiter := f.rates.of(credential(r))
		if isRateLimitEndpoint(r.URL.Path) {
			rs = limiter.peek() // free, and never refused
			rs.exceeded = false
		} else {
			rs = limiter.take()
		}
		rs.setHeaders(rec.Header())
	}
	if f.applyFaults(rec, r, kind) {
		return
	}
	switch kind {
	case API:
		f.serveAPI(rec, r, rs)
	default:
		f.serveGit(rec, r)
	}
}

// classify tells API requests (everything under /api/) from git/web ones.
func classify(path string) Kind {
	if path == "/api" || strings.HasPrefix(path, "/api/") {
		return API
	}
	return Git
}

// origin is the scheme://host the request was addressed to.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// recorder captures the response status and reports it once, as soon as the
// header is written, so that a client that has seen the response also sees it
// in Requests().
type recorder struct {
	http.ResponseWriter
	status   int
	reported bool
	done     func(status int)
}

func (w *recorder) WriteHeader(code int) {
	if !w.reported && code >= 200 {
		w.status = code
		w.reported = true
		w.done(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if !w.reported {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *recorder) Flush() {
	if !w.reported {
		w.WriteHeader(http.StatusOK)
	}
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) finish() {
	if !w.reported {
		w.reported = true
		w.status = http.StatusOK
		w.done(http.StatusOK)
	}
}
