package ocistore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gitfleet/internal/infra/errclass"
)

// Source is a place to pull from.
type Source struct {
	Name      string // how progress and results name it: "registry" or "peer:<runner-id>"
	Registry  string // host[:port] to contact; for a peer its peer address (127.0.0.1:PORT); "" = ref's registry
	Insecure  bool   // plain HTTP (always for peers)
	Anonymous bool   // no credentials (peers); otherwise authn.DefaultKeychain
	// Token is presented to a peer that requires it (PeerAccess.Token),
	// sent to the source's own host only.
	Token Token
}

// Progress reports a pull in flight. Done can step back when a source fails
// in the middle of a blob and the next one starts it over.
type Progress struct {
	Done   int64  // bytes of the image present in the store so far
	Total  int64  // bytes of the image: manifest, config and layers
	Source string // the source currently streaming ("" when none is)
	// Skipped are the sources given up for stalling, by name: the rest of
	// the pull does without them, and so should a retry of it.
	Skipped []string `json:",omitempty"`
	// Received counts every byte each source sent this pull, by name:
	// blobs stored, and those cut off, refused by verification or left
	// for another source. What a source was made to send, not what the
	// store kept.
	Received map[string]int64 `json:",omitempty"`
}

// DefaultStall is how long a source may send nothing before a pull gives
// it up, unless PullOptions say otherwise.
const DefaultStall = 30 * time.Second

// PullOptions tune one Pull; the zero value means the defaults.
type PullOptions struct {
	// Progress is told how far the pull is: at most every 100 ms while
	// bytes move — this pull's, or another pull's downloading a blob both
	// need —, at once when a source is given up, and, when the bytes stop,
	// with the last of them within 100 ms (a watcher counting what was
	// received misses nothing of a transfer that stalls). It is called on
	// the download's goroutine or a timer's, never two at once, and must
	// not block.
	Progress func(Progress)
	// Stall: a source that sends nothing for this long, or answers no
	// request within it, is given up (default: the store's, DefaultStall).
	// A watcher of Progress with a deadline (an activity's heartbeat
	// timeout) needs a shorter stall, so that a hung source is given up,
	// and that reported, before the watcher gives up on the whole pull.
	Stall time.Duration
}

// PullResult describes a finished pull.
type PullResult struct {
	Digest   string           // manifest digest "sha256:…"
	Size     int64            // total bytes of the image (manifest+config+layers)
	Fetched  int64            // bytes downloaded and stored by this call
	BySource map[string]int64 // Fetched per Source.Name
	// Received is every byte each source sent, failed fetches included
	// (Progress.Received); a failed pull's last progress report has it.
	Received map[string]int64
}

const (
	copyBuffer       = 256 << 10
	progressInterval = 100 * time.Millisecond
)

var manifestAccept = strings.Join([]string{
	string(types.OCIManifestSchema1), string(types.DockerManifestSchema2),
	string(types.OCIImageIndex), string(types.DockerManifestList),
}, ", ")

// errNotFound marks a source that does not have the manifest.
var errNotFound = errors.New("manifest unknown")

// Pull fetches image ref into the store and records it under name; see the
// package documentation for the protocol. ref's registry is only used when
// a source leaves Registry empty; its repository path is used with every
// source. The manifest comes from the first source that has it (when ref is
// a tag, that source decides what the tag means); every blob is verified
// against it, so a peer can withhold but not forge content. A ref by digest
// whose manifest is already stored needs no source at all.
//
// A source that stalls (opts.Stall) is given up for the rest of the pull,
// except the last one, every blob's fallback; one that fails otherwise is
// left for the next source for that blob only.
func (s *Store) Pull(ctx context.Context, name, ref string, sources []Source, opts PullOptions) (PullResult, error) {
	if name == "" {
		return PullResult{}, errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: empty image name", ref)
	}
	parsed, err := parseRef(ref)
	if err != nil {
		return PullResult{}, err
	}
	stall := opts.Stall
	if stall <= 0 {
		stall = s.stall
	}
	p := &puller{s: s, ref: ref, parsed: parsed, sources: sources, sessions: make([]*session, len(sources)),
		stalled: make([]bool, len(sources)), stall: stall, current: map[string]int64{},
		rep: &reporter{fn: opts.Progress, interval: progressInterval}, res: PullResult{BySource: map[string]int64{}, Received: map[string]int64{}}}
	defer p.rep.stop()
	return p.run(ctx, name)
}

// reporter delivers a pull's progress at most once per interval, and the
// latest report the interval held back once it has passed: a stream that
// stops (a source holding a transfer, a kill to come) leaves its watcher
// with every byte received, not those up to the last report that was due.
type reporter struct {
	fn       func(Progress)
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	pending *Progress
	timer   *time.Timer
}

func (r *reporter) offer(p Progress, force bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if force || now.Sub(r.last) >= r.interval {
		r.pending, r.last = nil, now
		r.fn(p)
		return
	}
	r.pending = &p
	if r.timer == nil {
		r.timer = time.AfterFunc(r.interval-now.Sub(r.last), r.flush)
	}
}

func (r *reporter) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if r.pending != nil {
		r.fn(*r.pending)
		r.pending, r.last = nil, time.Now()
	}
}

// stop drops a report still held back: the pull is over, and its last
// report was forced.
func (r *reporter) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.pending = nil
}

func parseRef(ref string) (name.Reference, error) {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return nil, errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: %v", ref, err)
	}
	if d, ok := parsed.(name.Digest); ok {
		if _, ok := hexOf(d.DigestStr()); !ok {
			return nil, errclass.Permanentf(errclass.ReasonUnsupported, "pull %s: only sha256 digests are supported", ref)
		}
	}
	return parsed, nil
}

type puller struct {
	s        *Store
	ref      string
	parsed   name.Reference
	sources  []Source
	sessions []*session
	rep      *reporter
	stall    time.Duration

	// sessMu serialises the sources' handshakes (session).
	sessMu sync.Mutex
	// mu guards what the blobs' downloads share: the result, the progress
	// and the sources given up.
	mu  sync.Mutex
	res PullResult
	// stalled marks the sources given up for stalling; skipped names them.
	stalled []bool
	skipped []string
	done    int64            // bytes of blobs present, those streaming excluded
	current map[string]int64 // by digest: bytes of each blob streaming now (or another pull's, while waiting on it)
	from    string
}

// ParallelBlobs is how many blobs one pull downloads at once. Two keep the
// link busy while one blob's request is answered; a peer serving several
// pulls (Fanout) sees at most that many requests of each
// (PeerAccess.ClientRequests, 8 by default, when they share an address).
const ParallelBlobs = 2

// giveUp leaves a source that stalled out of the rest of the pull — unless
// it is the last, every blob's fallback — and says so at once, so that a
// watcher of the progress sees the pull move on.
func (p *puller) giveUp(i int) {
	p.mu.Lock()
	if i == len(p.sources)-1 || p.stalled[i] {
		p.mu.Unlock()
		return
	}
	p.stalled[i] = true
	p.skipped = append(p.skipped, p.sources[i].Name)
	p.mu.Unlock()
	p.report(true)
}

func (p *puller) isStalled(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled[i]
}

// session is one source's authenticated transport, set up once per pull.
type session struct {
	src    Source
	repo   name.Repository
	client *http.Client
	err    error
	// stalled: the handshake got no answer within the stall bound.
	stalled bool
}

// session sets source i's transport up, the handshake (ping, token)
// bounded by the stall bound: a source that accepts the connection and
// never answers is given up like one that stops sending.
func (p *puller) session(ctx context.Context, i int) *session {
	p.sessMu.Lock()
	defer p.sessMu.Unlock()
	if ss := p.sessions[i]; ss != nil {
		return ss
	}
	src := p.sources[i]
	ss := &session{src: src}
	p.sessions[i] = ss
	host := src.Registry
	if host == "" {
		host = p.parsed.Context().RegistryStr()
	}
	var opts []name.Option
	if src.Insecure {
		opts = append(opts, name.Insecure)
	}
	reg, err := name.NewRegistry(host, opts...)
	if err != nil {
		ss.err = err
		return ss
	}
	ss.repo = reg.Repo(p.parsed.Context().RepositoryStr())
	auth := authn.Anonymous
	if src.Token != "" {
		auth = &authn.Basic{Username: peerUser, Password: string(src.Token)}
	} else if !src.Anonymous {
		if auth, err = authn.DefaultKeychain.Resolve(reg); err != nil {
			ss.err = err
			return ss
		}
	}
	// The context bounds the handshake only: the transport keeps none.
	hctx, cancel := context.WithTimeout(ctx, p.stall)
	defer cancel()
	// The peer token and keychain credentials go to this source's own host
	// only, whatever token service its challenge names.
	rt, err := transport.NewWithContext(hctx, reg, auth, KeepCredentials(reg, p.s.client), []string{ss.repo.Scope(transport.PullScope)})
	if err != nil {
		ss.err = err
		ss.stalled = hctx.Err() != nil && ctx.Err() == nil
		var terr *transport.Error
		switch {
		case ss.stalled:
			ss.err = &problem{what: fmt.Sprintf("stalled (no answer within %v)", p.stall), err: err, stalled: true}
		case errors.As(err, &terr) && terr.StatusCode == http.StatusTooManyRequests:
			ss.err = &problem{what: "busy (HTTP 429)", err: err, refused: true}
		}
		return ss
	}
	ss.client = &http.Client{Transport: rt}
	return ss
}

func (ss *session) url(kind, ref string) string {
	return fmt.Sprintf("%s://%s/v2/%s/%s/%s", ss.repo.Scheme(), ss.repo.RegistryStr(), ss.repo.RepositoryStr(), kind, ref)
}

func (p *puller) run(ctx context.Context, imageName string) (PullResult, error) {
	raw, mediaType, digest, from, err := p.resolve(ctx)
	if err != nil {
		return PullResult{}, err
	}
	if from != "" {
		p.res.Received[from] += int64(len(raw))
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return PullResult{}, errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: manifest %s: %v", p.ref, digest, err)
	}
	manifest := blob{digest: digest, size: int64(len(raw))}
	manifest.hex, _ = hexOf(digest)
	blobs, err := imageBlobs(m)
	if err != nil {
		return PullResult{}, errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: manifest %s: %v", p.ref, digest, err)
	}
	j, err := p.s.begin(p.ref, append(blobs, manifest))
	if err != nil {
		return PullResult{}, err
	}
	defer j.end()
	p.res.Digest, p.res.Size = digest, j.size
	// Peers may read the manifest, and the blobs as they arrive, from now.
	pl := &pulling{digest: digest, raw: raw, mediaType: mediaType}
	if _, byDigest := p.parsed.(name.Digest); !byDigest {
		pl.repo, pl.tag = p.parsed.Context().RepositoryStr(), p.parsed.Identifier()
	}
	j.announce(pl)

	if err := p.fetchAll(ctx, blobs); err != nil {
		return PullResult{}, p.failure(ctx, err)
	}
	// The manifest goes last, so a stored manifest always means a complete
	// image, whatever was interrupted.
	fetched, err := p.s.ensure(ctx, manifest, func(*flight) error {
		return p.s.ingest(bytes.NewReader(raw), manifest, make([]byte, 32<<10), nil)
	}, nil)
	if err != nil {
		return PullResult{}, fmt.Errorf("ocistore: pull %s: store manifest: %w", p.ref, err)
	}
	p.mu.Lock()
	p.done += manifest.size
	if fetched && from != "" {
		p.res.Fetched += manifest.size
		p.res.BySource[from] += manifest.size
	}
	p.mu.Unlock()
	if err := p.s.record(imageName, digest, mediaType, manifest.size); err != nil {
		return PullResult{}, err
	}
	p.mu.Lock()
	p.from = ""
	res := p.res
	p.mu.Unlock()
	p.report(true)
	return res, nil
}

// fetchAll makes every blob present, ParallelBlobs at a time in manifest
// order; the first failure stops the others.
func (p *puller) fetchAll(parent context.Context, blobs []blob) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	next := make(chan blob)
	errs := make(chan error, ParallelBlobs)
	var wg sync.WaitGroup
	for range min(ParallelBlobs, len(blobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, copyBuffer)
			for b := range next {
				if err := p.fetchBlob(ctx, b, buf); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	var first error
feed:
	for _, b := range blobs {
		select {
		case next <- b:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		// A download stopped by another's failure is not the reason.
		if first == nil || (errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = err
		}
	}
	if first == nil && parent.Err() != nil {
		first = parent.Err()
	}
	return first
}

// fetchBlob makes one blob present: stored already, downloaded by another
// pull meanwhile, or fetched from the sources.
func (p *puller) fetchBlob(ctx context.Context, b blob, buf []byte) error {
	// While another pull downloads a blob this one needs, its bytes are
	// this pull's progress: the wait is not silence. (ensure calls this at
	// most once per interval, and only when they moved.)
	waiting := func(received int64) {
		p.setCurrent(b, received, 0)
		p.report(true)
	}
	fetched, err := p.s.ensure(ctx, b, func(f *flight) error { return p.fetch(ctx, b, f, buf) }, waiting)
	p.mu.Lock()
	delete(p.current, b.digest)
	if err == nil && !fetched {
		p.done += b.size
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if !fetched {
		p.report(false)
	}
	return nil
}

// setCurrent sets (add 0) or adds to the bytes of a blob streaming now.
func (p *puller) setCurrent(b blob, set, add int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add != 0 {
		p.current[b.digest] += add
	} else {
		p.current[b.digest] = set
	}
}

func (p *puller) failure(ctx context.Context, err error) error {
	p.mu.Lock()
	p.from = ""
	p.mu.Unlock()
	p.report(true) // the bytes received to the last, for whoever counts them
	if ctx.Err() != nil {
		return errclass.Wrap(errclass.Retryable, "interrupted", fmt.Errorf("ocistore: pull %s: %w", p.ref, ctx.Err()))
	}
	return err
}

// imageBlobs lists config and layers once each, in manifest order.
func imageBlobs(m *v1.Manifest) ([]blob, error) {
	var out []blob
	seen := map[string]bool{}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		b, err := blobOf(d)
		if err != nil {
			return nil, err
		}
		if !seen[b.digest] {
			seen[b.digest] = true
			out = append(out, b)
		}
	}
	return out, nil
}

// report tells the progress, at most once per interval unless forced (the
// reporter delivers the last one held back when the interval has passed).
func (p *puller) report(force bool) {
	if p.rep.fn == nil {
		return
	}
	p.mu.Lock()
	done := p.done
	for _, n := range p.current {
		done += n
	}
	pr := Progress{Done: done, Total: p.res.Size, Source: p.from, Skipped: slices.Clone(p.skipped),
		Received: maps.Clone(p.res.Received)}
	p.mu.Unlock()
	p.rep.offer(pr, force)
}

// resolve finds the image manifest: locally when ref is a stored digest,
// else from the first source that serves it, descending into an index for
// this platform. from is the source's name, "" when local.
func (p *puller) resolve(ctx context.Context) (raw []byte, mediaType types.MediaType, digest, from string, err error) {
	if d, ok := p.parsed.(name.Digest); ok {
		if raw, mt, ok := p.s.localManifest(d.DigestStr()); ok {
			return raw, mt, d.DigestStr(), "", nil
		}
	}
	if len(p.sources) == 0 {
		return nil, "", "", "", errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: no sources", p.ref)
	}
	notFound := 0
	var last string
	var problems []string
	for i := range p.sources {
		if ctx.Err() != nil {
			return nil, "", "", "", p.failure(ctx, ctx.Err())
		}
		raw, mediaType, digest, err = p.manifestFrom(ctx, i)
		if err == nil {
			return raw, mediaType, digest, p.sources[i].Name, nil
		}
		if errors.Is(err, errNotFound) {
			notFound++
		}
		last = fmt.Sprintf("manifest from %s: %v", p.sources[i].Name, err)
		problems = append(problems, last)
	}
	if notFound == len(p.sources) {
		return nil, "", "", "", errclass.Permanentf(errclass.ReasonNotFound, "image %s not found", p.ref)
	}
	return nil, "", "", "", errclass.Wrap(errclass.Retryable, last, fmt.Errorf("ocistore: pull %s: %s", p.ref, strings.Join(problems, "; ")))
}

// manifestFrom asks source i for the image manifest (through an index for
// this platform). The whole exchange — the session's handshake and every
// GET — must end within the stall bound: a source that accepts the
// connection and never answers is given up like one that stops sending.
func (p *puller) manifestFrom(ctx context.Context, i int) ([]byte, types.MediaType, string, error) {
	sctx, cancel := context.WithTimeout(ctx, p.stall)
	defer cancel()
	raw, mediaType, digest, err := func() ([]byte, types.MediaType, string, error) {
		ss := p.session(sctx, i)
		if ss.err != nil {
			return nil, "", "", ss.err
		}
		raw, mediaType, digest, err := ss.manifest(sctx, p.parsed.Identifier())
		if err == nil && mediaType.IsIndex() {
			var child string
			if child, err = pickPlatform(raw); err == nil {
				raw, mediaType, digest, err = ss.manifest(sctx, child)
			}
		}
		if err == nil && !mediaType.IsImage() {
			err = fmt.Errorf("unsupported manifest media type %q", mediaType)
		}
		return raw, mediaType, digest, err
	}()
	var pr *problem
	switch {
	case errors.As(err, &pr) && (pr.stalled || pr.refused):
		p.giveUp(i)
	case err != nil && sctx.Err() != nil && ctx.Err() == nil:
		p.giveUp(i)
		err = &problem{what: fmt.Sprintf("stalled (no answer within %v)", p.stall), err: err, stalled: true}
	}
	return raw, mediaType, digest, err
}

// localManifest returns a stored image manifest by digest.
func (s *Store) localManifest(digest string) ([]byte, types.MediaType, bool) {
	hex, ok := hexOf(digest)
	if !ok {
		return nil, "", false
	}
	raw, err := readLimited(s.blobPath(hex), maxManifest)
	if err != nil || fmt.Sprintf("sha256:%x", sha256.Sum256(raw)) != digest {
		return nil, "", false
	}
	mt := mediaTypeOf(raw, "")
	if !mt.IsImage() {
		return nil, "", false
	}
	return raw, mt, true
}

// mediaTypeOf prefers the manifest's own mediaType field over the
// Content-Type a server sent.
func mediaTypeOf(raw []byte, contentType string) types.MediaType {
	var probe struct {
		MediaType types.MediaType `json:"mediaType"`
	}
	if json.Unmarshal(raw, &probe) == nil && probe.MediaType != "" {
		return probe.MediaType
	}
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		return types.MediaType(mt)
	}
	return ""
}

// manifest fetches a manifest or index by tag or digest, verifying it
// when fetched by digest.
func (ss *session) manifest(ctx context.Context, ref string) ([]byte, types.MediaType, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ss.url("manifests", ref), nil)
	if err != nil {
		return nil, "", "", err
	}
	req.Header.Set("Accept", manifestAccept)
	resp, err := ss.client.Do(req)
	if err != nil {
		return nil, "", "", err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, "", "", errNotFound
	case refusal(resp) != nil:
		return nil, "", "", refusal(resp)
	case resp.StatusCode != http.StatusOK:
		return nil, "", "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	if err != nil {
		return nil, "", "", err
	}
	if len(raw) > maxManifest {
		return nil, "", "", fmt.Errorf("manifest larger than %d bytes", maxManifest)
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(raw))
	if _, byDigest := hexOf(ref); byDigest && digest != ref {
		return nil, "", "", errors.New("digest mismatch")
	}
	return raw, mediaTypeOf(raw, resp.Header.Get("Content-Type")), digest, nil
}

// pickPlatform chooses this host's platform from an index, falling back to
// linux/amd64, then to the first manifest.
func pickPlatform(raw []byte) (string, error) {
	idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	var images []v1.Descriptor
	for _, d := range idx.Manifests {
		if d.MediaType == "" || d.MediaType.IsImage() {
			images = append(images, d)
		}
	}
	if len(images) == 0 {
		return "", errors.New("index lists no image manifest")
	}
	for _, want := range []v1.Platform{{OS: runtime.GOOS, Architecture: runtime.GOARCH}, {OS: "linux", Architecture: "amd64"}} {
		for _, d := range images {
			if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
				return d.Digest.String(), nil
			}
		}
	}
	return images[0].Digest.String(), nil
}

// fetch tries the sources in order for one blob; a source that fails is
// left for the next, one that stalled for the rest of the pull. f counts
// the bytes received, for pulls waiting on this blob.
func (p *puller) fetch(ctx context.Context, b blob, f *flight, buf []byte) error {
	var problems []string
	var last string
	for i := range p.sources {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p.isStalled(i) {
			continue
		}
		p.setCurrent(b, 0, 0)
		f.received.Store(0)
		ss := p.session(ctx, i)
		err := ss.err
		if err == nil {
			err = p.fetchFrom(ctx, ss, b, f, buf)
		}
		p.mu.Lock()
		p.current[b.digest] = 0
		if p.from == ss.src.Name {
			p.from = ""
		}
		p.mu.Unlock()
		var pr *problem
		if errors.As(err, &pr) && (pr.stalled || pr.refused) {
			p.giveUp(i)
		}
		if err == nil {
			p.mu.Lock()
			delete(p.current, b.digest)
			p.done += b.size
			p.res.Fetched += b.size
			p.res.BySource[ss.src.Name] += b.size
			p.mu.Unlock()
			p.report(false)
			return nil
		}
		last = fmt.Sprintf("blob %s from %s: %s", b.digest, ss.src.Name, shortProblem(err))
		problems = append(problems, fmt.Sprintf("from %s: %v", ss.src.Name, err))
	}
	if len(p.sources) == 0 {
		return errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: blob %s: no sources", p.ref, b.digest)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errclass.Wrap(errclass.Retryable, last,
		fmt.Errorf("ocistore: pull %s: blob %s: every source failed: %s", p.ref, b.digest, strings.Join(problems, "; ")))
}

// refusal is the problem of a source that refuses this client: 429, its
// limit on this client's requests (a peer's PeerAccess), or 401, a peer
// whose token this runner does not have. Either is given up for the rest
// of the pull like a source that stalls, rather than asked again for every
// blob (the last source, the registry, never is); nil for other answers.
func refusal(resp *http.Response) *problem {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		what := "busy (HTTP 429)"
		if ra := resp.Header.Get("Retry-After"); ra != "" && len(ra) <= 32 {
			what = fmt.Sprintf("busy (HTTP 429, retry after %q)", ra)
		}
		return &problem{what: what, refused: true}
	case http.StatusUnauthorized:
		return &problem{what: "unauthorized (HTTP 401)", refused: true}
	}
	return nil
}

// shortProblem keeps the reason short: a problem's own words, or the error.
func shortProblem(err error) string {
	var pr *problem
	if errors.As(err, &pr) {
		return pr.what
	}
	return err.Error()
}

func (p *puller) fetchFrom(parent context.Context, ss *session, b blob, f *flight, buf []byte) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stall := time.AfterFunc(p.stall, cancel)
	defer stall.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ss.url("blobs", b.digest), nil)
	if err != nil {
		return err
	}
	resp, err := ss.client.Do(req)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return &problem{what: fmt.Sprintf("stalled (no answer within %v)", p.stall), err: err, stalled: true}
	}
	if err != nil {
		return &problem{what: "request failed", err: err}
	}
	defer resp.Body.Close()
	if pr := refusal(resp); pr != nil {
		return pr
	}
	if resp.StatusCode != http.StatusOK {
		return &problem{what: fmt.Sprintf("HTTP %d", resp.StatusCode)}
	}
	if resp.ContentLength > b.size {
		// Refused before a byte is read: ingest would stop at the size.
		return &problem{what: fmt.Sprintf("longer than declared (%d bytes announced, %d declared)", resp.ContentLength, b.size)}
	}
	p.mu.Lock()
	p.from = ss.src.Name
	p.mu.Unlock()
	p.report(false)
	err = p.s.ingestStream(resp.Body, b, buf, func(n int64) {
		stall.Reset(p.stall)
		p.mu.Lock()
		p.current[b.digest] += n
		p.res.Received[ss.src.Name] += n
		p.mu.Unlock()
		f.received.Add(n)
		p.report(false)
	}, f)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return &problem{what: fmt.Sprintf("stalled (nothing received for %v)", p.stall), err: err, stalled: true}
	}
	return err
}
