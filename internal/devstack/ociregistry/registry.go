package ociregistry

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Options configures Start.
type Options struct {
	// BytesPerSecond throttles the egress of all connections together
	// (0 = unlimited).
	BytesPerSecond int64
	// Dir, when set, keeps blobs on disk there instead of in memory. Note
	// that go-containerregistry's disk handler hashes a blob again on every
	// HEAD and GET, and uploads still pass through memory.
	Dir string
	// Addr is where to listen (default 127.0.0.1 on a free port).
	Addr string
}

// Registry is a running in-process registry. All methods are safe for
// concurrent use.
type Registry struct {
	ln     net.Listener
	srv    *http.Server
	inner  http.Handler
	bucket atomic.Pointer[bucket] // nil = unlimited

	mu           sync.Mutex
	blobBytes    int64
	bytesOf      map[string]int64
	blobGets     int
	getsOf       map[string]int
	manifestGets int
	faults       []*fault
}

// Start serves a new, empty registry on 127.0.0.1 on a free port.
func Start(opts Options) (*Registry, error) {
	regOpts := []registry.Option{registry.Logger(log.New(io.Discard, "", 0))}
	if opts.Dir != "" {
		regOpts = append(regOpts, registry.WithBlobHandler(registry.NewDiskBlobHandler(opts.Dir)))
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ociregistry: listen: %w", err)
	}
	r := &Registry{
		ln:      ln,
		inner:   registry.New(regOpts...),
		bytesOf: map[string]int64{},
		getsOf:  map[string]int{},
	}
	r.SetRate(opts.BytesPerSecond)
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed on Close
	return r, nil
}

// Addr is the registry's host:port, "127.0.0.1:PORT".
func (r *Registry) Addr() string { return r.ln.Addr().String() }

// Close stops the server and drops open connections.
func (r *Registry) Close() { r.srv.Close() }

// Ref names an image in this registry: Ref("snapshots/base", "v1") is
// "127.0.0.1:PORT/snapshots/base:v1"; a digest ("sha256:…") gives "@".
func (r *Registry) Ref(repo, tagOrDigest string) string {
	if digestRE.MatchString(tagOrDigest) {
		return r.Addr() + "/" + repo + "@" + tagOrDigest
	}
	return r.Addr() + "/" + repo + ":" + tagOrDigest
}

// Push uploads img under ref (a tag or digest reference into this
// registry) and returns its manifest digest.
func (r *Registry) Push(ref string, img v1.Image) (string, error) {
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("ociregistry: push %s: %w", ref, err)
	}
	if err := remote.Write(tag, img); err != nil {
		return "", fmt.Errorf("ociregistry: push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// PushIndex uploads a multi-platform image index under ref and returns its
// digest.
func (r *Registry) PushIndex(ref string, idx v1.ImageIndex) (string, error) {
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("ociregistry: push %s: %w", ref, err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		return "", fmt.Errorf("ociregistry: push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// SetRate changes the egress throttle (0 = unlimited), for transfers in
// flight too: they pick the new rate up at their next chunk.
func (r *Registry) SetRate(bytesPerSecond int64) {
	if bytesPerSecond <= 0 {
		r.bucket.Store(nil)
		return
	}
	r.bucket.Store(newBucket(bytesPerSecond))
}

// BlobBytes is the number of blob body bytes sent since the last reset.
func (r *Registry) BlobBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobBytes
}

// BlobBytesOf is the number of body bytes of one blob sent since the last
// reset.
func (r *Registry) BlobBytesOf(digest string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytesOf[digest]
}

// BlobGets counts blob GET requests (faulted ones included).
func (r *Registry) BlobGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets
}

// BlobGetsOf counts GET requests for one blob.
func (r *Registry) BlobGetsOf(digest string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.getsOf[digest]
}

// ManifestGets counts manifest GET requests.
func (r *Registry) ManifestGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manifestGets
}

// ResetCounters zeroes every counter; armed faults stay.
func (r *Registry) ResetCounters() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobBytes, r.blobGets, r.manifestGets = 0, 0, 0
	r.bytesOf = map[string]int64{}
	r.getsOf = map[string]int{}
}

type faultKind int

const (
	corrupt faultKind = iota + 1
	truncate
	fail500
	failAfter
	holdAfter
	pauseAt
)

type fault struct {
	kind   faultKind
	digest string // "" = any blob
	left   int
	after  int64 // failAfter, holdAfter, pauseAt: bytes sent before the connection drops, holds or pauses
	// pauseAt: closed to send the rest; corrupted: one byte of the first
	// after bytes flipped.
	release   chan struct{}
	corrupted bool
	cut       bool
}

// Corrupt flips one byte in the middle of the next n GETs of digest (any
// blob if ""); the length stays right, so only verification notices.
func (r *Registry) Corrupt(digest string, n int) {
	r.arm(&fault{kind: corrupt, digest: digest, left: n})
}

// Truncate cuts the body of the next n GETs of digest at half its length
// and closes the connection.
func (r *Registry) Truncate(digest string, n int) {
	r.arm(&fault{kind: truncate, digest: digest, left: n})
}

// Fail answers the next n GETs of digest with 500 and an OCI error body.
func (r *Registry) Fail(digest string, n int) { r.arm(&fault{kind: fail500, digest: digest, left: n}) }

// FailAfter sends the first bytes of the body of the next n GETs of digest,
// then closes the connection.
func (r *Registry) FailAfter(digest string, bytes int64, n int) {
	r.arm(&fault{kind: failAfter, digest: digest, left: n, after: bytes})
}

// HoldAfter sends the first bytes of the body of the next n GETs of digest,
// flushed, then nothing more until the client goes away: a transfer
// stopped at a known byte, for as long as a test needs (a client's stall
// bound still ends it).
func (r *Registry) HoldAfter(digest string, bytes int64, n int) {
	r.arm(&fault{kind: holdAfter, digest: digest, left: n, after: bytes})
}

// Paused is how a transfer held by PauseAt ends once released.
type Paused int

const (
	// Resumed: the rest of the body follows, as sent.
	Resumed Paused = iota
	// Corrupted: the rest follows, but one byte among the first ones was
	// flipped (the length is right, so only verification notices).
	Corrupted
	// Cut: the connection drops, the body short of its length.
	Cut
)

// PauseAt sends the first bytes of the body of the next GET of digest,
// flushed, then nothing until release is called (or the client goes away),
// then ends as end says: a transfer a test holds at a known byte while it
// looks at who reads it.
func (r *Registry) PauseAt(digest string, bytes int64, end Paused) (release func()) {
	f := &fault{kind: pauseAt, digest: digest, left: 1, after: bytes, release: make(chan struct{}), corrupted: end == Corrupted, cut: end == Cut}
	r.arm(f)
	var once sync.Once
	return func() { once.Do(func() { close(f.release) }) }
}

// Clear disarms every fault.
func (r *Registry) Clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = nil
}

func (r *Registry) arm(f *fault) {
	if f.left <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

var (
	digestRE  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	blobPath  = regexp.MustCompile(`^/v2/.+/blobs/(sha256:[0-9a-f]{64})$`)
	manifPath = regexp.MustCompile(`^/v2/.+/manifests/[^/]+$`)
)

// take counts a blob GET and consumes one shot of the first fault armed for
// it.
func (r *Registry) take(digest string) *fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobGets++
	r.getsOf[digest]++
	for i, f := range r.faults {
		if f.digest != "" && f.digest != digest {
			continue
		}
		f.left--
		if f.left == 0 {
			r.faults = append(r.faults[:i:i], r.faults[i+1:]...)
		}
		return f
	}
	return nil
}

func (r *Registry) sent(digest string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobBytes += int64(n)
	r.bytesOf[digest] += int64(n)
}

func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w = &throttled{ResponseWriter: w, ctx: req.Context(), reg: r}
	if req.Method != http.MethodGet {
		r.inner.ServeHTTP(w, req)
		return
	}
	m := blobPath.FindStringSubmatch(req.URL.Path)
	if m == nil {
		if manifPath.MatchString(req.URL.Path) {
			r.mu.Lock()
			r.manifestGets++
			r.mu.Unlock()
		}
		r.inner.ServeHTTP(w, req)
		return
	}
	digest := m[1]
	f := r.take(digest)
	if f != nil && f.kind == fail500 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"errors":[{"code":"UNKNOWN","message":"injected failure for %s"}]}`, digest)
		return
	}
	r.inner.ServeHTTP(&blobWriter{ResponseWriter: w, reg: r, digest: digest, fault: f, limit: -1, ctx: req.Context()}, req)
}

// blobWriter counts a blob body and applies a fault to it.
type blobWriter struct {
	http.ResponseWriter
	reg    *Registry
	digest string
	fault  *fault
	length int64 // Content-Length announced, -1 if unknown
	off    int64
	limit  int64 // bytes after which the connection drops, -1 for none
	ctx    context.Context
	paused bool // a pauseAt fault has paused (and been released)
}

func (w *blobWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *blobWriter) WriteHeader(code int) {
	w.length = -1
	if cl, err := strconv.ParseInt(w.Header().Get("Content-Length"), 10, 64); err == nil {
		w.length = cl
	}
	if w.fault != nil && code == http.StatusOK {
		switch w.fault.kind {
		case truncate:
			w.limit = w.length / 2
		case failAfter, holdAfter:
			w.limit = w.fault.after
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *blobWriter) Write(p []byte) (int, error) {
	if f := w.fault; f != nil && f.kind == pauseAt && !w.paused && w.off+int64(len(p)) > f.after {
		w.paused = true
		n, err := w.write(p[:f.after-w.off])
		if err != nil {
			return n, err
		}
		http.NewResponseController(w).Flush() //nolint:errcheck // the client sees it or is gone
		select {
		case <-f.release:
		case <-w.ctx.Done():
			return n, w.ctx.Err()
		}
		if f.cut {
			panic(http.ErrAbortHandler)
		}
		m, err := w.write(p[n:])
		return n + m, err
	}
	if w.limit >= 0 && w.off+int64(len(p)) > w.limit {
		w.write(p[:w.limit-w.off]) //nolint:errcheck // the connection is dropped anyway
		// Flush what was promised, then drop the connection: net/http
		// closes it silently on ErrAbortHandler, leaving the client short
		// of the announced Content-Length.
		http.NewResponseController(w).Flush() //nolint:errcheck
		if w.fault.kind == holdAfter {
			<-w.ctx.Done()
		}
		panic(http.ErrAbortHandler)
	}
	return w.write(p)
}

func (w *blobWriter) write(p []byte) (int, error) {
	if f := w.fault; f != nil && (f.kind == corrupt && w.length > 0 || f.kind == pauseAt && f.corrupted && f.after > 0) {
		mid := w.length / 2
		if f.kind == pauseAt {
			mid = f.after / 2
		}
		if mid >= w.off && mid < w.off+int64(len(p)) {
			// Three writes rather than a copy: p may be the whole blob.
			i := mid - w.off
			n, err := w.pass(p[:i])
			if err != nil {
				return n, err
			}
			m, err := w.pass([]byte{p[i] ^ 0xff})
			if n += m; err != nil {
				return n, err
			}
			m, err = w.pass(p[i+1:])
			return n + m, err
		}
	}
	return w.pass(p)
}

func (w *blobWriter) pass(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.off += int64(n)
	w.reg.sent(w.digest, n)
	return n, err
}

// throttled meters a response body through the shared bucket, in chunks
// small enough that one large Write cannot monopolise the link.
type throttled struct {
	http.ResponseWriter
	ctx context.Context
	reg *Registry
}

const chunk = 32 << 10

func (t *throttled) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (t *throttled) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		c := p[:min(len(p), chunk)]
		if b := t.reg.bucket.Load(); b != nil {
			if err := b.wait(t.ctx, len(c)); err != nil {
				return written, err
			}
		}
		n, err := t.ResponseWriter.Write(c)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}
