package ocistore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime"
	"strings"
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
}

// Progress reports a pull in flight. Done can step back when a source fails
// in the middle of a blob and the next one starts it over.
type Progress struct {
	Done   int64  // bytes of the image present in the store so far
	Total  int64  // bytes of the image: manifest, config and layers
	Source string // the source currently streaming ("" when none is)
}

// PullResult describes a finished pull.
type PullResult struct {
	Digest   string           // manifest digest "sha256:…"
	Size     int64            // total bytes of the image (manifest+config+layers)
	Fetched  int64            // bytes downloaded and stored by this call
	BySource map[string]int64 // Fetched per Source.Name
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
func (s *Store) Pull(ctx context.Context, name, ref string, sources []Source, progress func(Progress)) (PullResult, error) {
	if name == "" {
		return PullResult{}, errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: empty image name", ref)
	}
	parsed, err := parseRef(ref)
	if err != nil {
		return PullResult{}, err
	}
	p := &puller{s: s, ref: ref, parsed: parsed, sources: sources, sessions: make([]*session, len(sources)),
		progress: progress, tick: throttle{interval: progressInterval}, res: PullResult{BySource: map[string]int64{}}}
	return p.run(ctx, name)
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
	progress func(Progress)
	tick     throttle
	res      PullResult

	done    int64 // bytes of blobs present, current one excluded
	current int64 // bytes of the blob streaming now
	from    string
	buf     []byte
}

// session is one source's authenticated transport, set up once per pull.
type session struct {
	src    Source
	repo   name.Repository
	client *http.Client
	err    error
}

func (p *puller) session(ctx context.Context, i int) *session {
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
	if !src.Anonymous {
		if auth, err = authn.DefaultKeychain.Resolve(reg); err != nil {
			ss.err = err
			return ss
		}
	}
	rt, err := transport.NewWithContext(ctx, reg, auth, p.s.client, []string{ss.repo.Scope(transport.PullScope)})
	if err != nil {
		ss.err = err
		return ss
	}
	ss.client = &http.Client{Transport: rt}
	return ss
}

func (ss *session) url(kind, ref string) string {
	return fmt.Sprintf("%s://%s/v2/%s/%s/%s", ss.repo.Scheme(), ss.repo.RegistryStr(), ss.repo.RepositoryStr(), kind, ref)
}

func (p *puller) run(ctx context.Context, name string) (PullResult, error) {
	raw, mediaType, digest, from, err := p.resolve(ctx)
	if err != nil {
		return PullResult{}, err
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
	var total int64
	for _, b := range blobs {
		total += b.size
	}
	total += manifest.size
	p.res.Digest, p.res.Size = digest, total

	j, err := p.s.begin(p.ref, append(blobs, manifest))
	if err != nil {
		return PullResult{}, err
	}
	defer j.end()

	p.buf = make([]byte, copyBuffer)
	for _, b := range blobs {
		fetched, err := p.s.ensure(ctx, b, func() error { return p.fetch(ctx, b) })
		if err != nil {
			return PullResult{}, p.failure(ctx, err)
		}
		if !fetched {
			p.done += b.size
			p.report(false)
		}
	}
	// The manifest goes last, so a stored manifest always means a complete
	// image, whatever was interrupted.
	fetched, err := p.s.ensure(ctx, manifest, func() error {
		return p.s.ingest(bytes.NewReader(raw), manifest, p.buf, nil)
	})
	if err != nil {
		return PullResult{}, fmt.Errorf("ocistore: pull %s: store manifest: %w", p.ref, err)
	}
	p.done += manifest.size
	if fetched && from != "" {
		p.res.Fetched += manifest.size
		p.res.BySource[from] += manifest.size
	}
	if err := p.s.record(name, digest, mediaType, manifest.size); err != nil {
		return PullResult{}, err
	}
	p.from = ""
	p.report(true)
	return p.res, nil
}

func (p *puller) failure(ctx context.Context, err error) error {
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

func (p *puller) report(final bool) {
	if p.progress == nil || (!final && !p.tick.due()) {
		return
	}
	p.progress(Progress{Done: p.done + p.current, Total: p.res.Size, Source: p.from})
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
		ss := p.session(ctx, i)
		if ss.err != nil {
			last = fmt.Sprintf("manifest from %s: %v", ss.src.Name, ss.err)
			problems = append(problems, last)
			continue
		}
		raw, mediaType, digest, err = ss.manifest(ctx, p.parsed.Identifier())
		if err == nil && mediaType.IsIndex() {
			var child string
			if child, err = pickPlatform(raw); err == nil {
				raw, mediaType, digest, err = ss.manifest(ctx, child)
			}
		}
		if err == nil && !mediaType.IsImage() {
			err = fmt.Errorf("unsupported manifest media type %q", mediaType)
		}
		if err == nil {
			return raw, mediaType, digest, ss.src.Name, nil
		}
		if errors.Is(err, errNotFound) {
			notFound++
		}
		last = fmt.Sprintf("manifest from %s: %v", ss.src.Name, err)
		problems = append(problems, last)
	}
	if notFound == len(p.sources) {
		return nil, "", "", "", errclass.Permanentf(errclass.ReasonNotFound, "image %s not found", p.ref)
	}
	return nil, "", "", "", errclass.Wrap(errclass.Retryable, last, fmt.Errorf("ocistore: pull %s: %s", p.ref, strings.Join(problems, "; ")))
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
// left for the next.
func (p *puller) fetch(ctx context.Context, b blob) error {
	var problems []string
	var last string
	for i := range p.sources {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ss := p.session(ctx, i)
		err := ss.err
		if err == nil {
			err = p.fetchFrom(ctx, ss, b)
		}
		p.current, p.from = 0, ""
		if err == nil {
			p.done += b.size
			p.res.Fetched += b.size
			p.res.BySource[ss.src.Name] += b.size
			p.report(false)
			return nil
		}
		last = fmt.Sprintf("blob %s from %s: %s", b.digest, ss.src.Name, shortProblem(err))
		problems = append(problems, fmt.Sprintf("from %s: %v", ss.src.Name, err))
	}
	if len(p.sources) == 0 {
		return errclass.Permanentf(errclass.ReasonInvalidInput, "pull %s: blob %s: no sources", p.ref, b.digest)
	}
	return errclass.Wrap(errclass.Retryable, last,
		fmt.Errorf("ocistore: pull %s: blob %s: every source failed: %s", p.ref, b.digest, strings.Join(problems, "; ")))
}

// shortProblem keeps the reason short: a problem's own words, or the error.
func shortProblem(err error) string {
	var pr *problem
	if errors.As(err, &pr) {
		return pr.what
	}
	return err.Error()
}

func (p *puller) fetchFrom(parent context.Context, ss *session, b blob) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stall := time.AfterFunc(p.s.stall, cancel)
	defer stall.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ss.url("blobs", b.digest), nil)
	if err != nil {
		return err
	}
	resp, err := ss.client.Do(req)
	if err != nil {
		return &problem{what: "request failed", err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &problem{what: fmt.Sprintf("HTTP %d", resp.StatusCode)}
	}
	p.from = ss.src.Name
	p.report(false)
	err = p.s.ingest(resp.Body, b, p.buf, func(n int64) {
		stall.Reset(p.s.stall)
		p.current += n
		p.report(false)
	})
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return &problem{what: fmt.Sprintf("stalled (nothing received for %v)", p.s.stall), err: err}
	}
	return err
}
