package ocistore

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

var (
	repoComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$`)
	tagRE           = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
)

// PeerHandler serves the store's images read-only over the OCI
// distribution API, so that other runners can pull from this one:
//
//   - GET/HEAD /v2/ answers 200 {};
//   - GET/HEAD /v2/<repo>/manifests/<ref> serves a stored image's manifest
//     by digest, or by tag when the tag equals a stored image's name, with
//     its media type and Docker-Content-Digest;
//   - GET/HEAD /v2/<repo>/blobs/<digest> streams a complete blob (Range
//     supported).
//
// A runner serves what it has verified while it is still pulling: the
// manifest of a pull in progress (by digest, or by the tag the pull
// resolved) and the blobs it lists, a blob being received streamed as it
// arrives (no Range) — every byte but the last, which goes only once the
// whole blob's digest and size are checked (stream), and a transfer that
// fails verification is cut off. So a peer never receives a complete copy
// of a blob its source has not verified, and verifies it again itself
// before storing it. A request for a blob or manifest the store does not
// have yet waits while a pull in progress lists it, and at most
// UnknownWait for one to begin that does; otherwise it is 404.
//
// The repository is checked for syntax only: the store is content
// addressed, so any repository path serves the same blobs. Digests must be
// sha256:<64 lowercase hex> and are the only part of a request that reaches
// a file name; temporary files never match. Writes answer 405, everything
// else 404, with OCI error bodies. Bytes sent are counted in ServedBytes.
func (s *Store) PeerHandler() http.Handler { return http.HandlerFunc(s.servePeer) }

// ServedBytes counts the manifest and blob bytes PeerHandler has sent.
func (s *Store) ServedBytes() int64 { return s.served.Load() }

func (s *Store) servePeer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		ociError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this peer is read-only")
		return
	}
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "2")
		if r.Method == http.MethodGet {
			io.WriteString(w, "{}")
		}
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 3 {
		ociError(w, http.StatusNotFound, "NOT_FOUND", "unknown path")
		return
	}
	n := len(parts)
	kind, ref := parts[n-2], parts[n-1]
	if kind != "manifests" && kind != "blobs" {
		ociError(w, http.StatusNotFound, "NOT_FOUND", "unknown path")
		return
	}
	for _, c := range parts[:n-2] {
		if !repoComponentRE.MatchString(c) {
			ociError(w, http.StatusNotFound, "NAME_UNKNOWN", "invalid repository name")
			return
		}
	}
	if kind == "blobs" {
		hex, ok := hexOf(ref)
		if !ok {
			ociError(w, http.StatusBadRequest, "DIGEST_INVALID", "invalid digest")
			return
		}
		s.serveBlob(w, r, blob{digest: ref, hex: hex}, strings.Join(parts[:n-2], "/"))
		return
	}
	digest, mediaType, ok := s.lookupManifest(ref)
	if !ok {
		if raw, pl := s.waitManifest(r, strings.Join(parts[:n-2], "/"), ref); pl != nil {
			w.Header().Set("Content-Type", string(pl.mediaType))
			w.Header().Set("Docker-Content-Digest", pl.digest)
			w.Header().Set("Content-Length", fmt.Sprint(len(raw)))
			if r.Method == http.MethodGet {
				(&countingResponse{ResponseWriter: w, n: &s.served}).Write(raw) //nolint:errcheck // a client gone is no error of ours
			}
			return
		}
		if _, isDigest := hexOf(ref); !isDigest && !tagRE.MatchString(ref) {
			ociError(w, http.StatusBadRequest, "MANIFEST_INVALID", "invalid reference")
			return
		}
		ociError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown")
		return
	}
	hex, _ := hexOf(digest)
	s.serveFile(w, r, hex, digest, mediaType, "MANIFEST_UNKNOWN")
}

// lookupManifest finds an indexed image by manifest digest or by name.
func (s *Store) lookupManifest(ref string) (digest, mediaType string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, byDigest := hexOf(ref)
	for _, e := range s.entries {
		if (byDigest && e.desc.Digest.String() == ref) || (!byDigest && e.name != "" && e.name == ref) {
			return e.desc.Digest.String(), string(e.desc.MediaType), true
		}
	}
	return "", "", false
}

func (s *Store) serveFile(w http.ResponseWriter, r *http.Request, hex, digest, contentType, unknown string) {
	f, err := os.Open(s.blobPath(hex))
	if err != nil {
		ociError(w, http.StatusNotFound, unknown, "unknown "+digest)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Cache-Control", "max-age=31536000") // content addressed
	http.ServeContent(&countingResponse{ResponseWriter: w, n: &s.served}, r, "", time.Time{}, f)
}

// UnknownWait is how long a peer request for a blob or manifest that no
// pull in progress lists yet waits for one that does to begin: the
// propagation starts a runner's pull from a peer right after that peer's
// own, and the two need not begin in that order.
var UnknownWait = 3 * time.Second

// waitManifest finds the manifest of a pull in progress by digest or by
// the tag it resolved in repo, waiting UnknownWait at most for one to
// begin.
func (s *Store) waitManifest(r *http.Request, repo, ref string) ([]byte, *pulling) {
	_, byDigest := hexOf(ref)
	if !byDigest && !tagRE.MatchString(ref) {
		return nil, nil
	}
	timeout := time.NewTimer(UnknownWait)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		for _, pl := range s.pulling {
			if (byDigest && pl.digest == ref) || (!byDigest && pl.tag == ref && pl.repo == repo) {
				s.mu.Unlock()
				return pl.raw, pl
			}
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			return nil, nil
		case <-r.Context().Done():
			return nil, nil
		}
	}
}

// serveBlob serves a stored blob, or follows it while a pull of this store
// receives it (stream); one that a pull in progress lists but has not
// started is waited for, one that none lists for UnknownWait at most.
func (s *Store) serveBlob(w http.ResponseWriter, r *http.Request, b blob, repo string) {
	timeout := time.NewTimer(UnknownWait)
	defer timeout.Stop()
	unknown := timeout.C
	for {
		s.mu.Lock()
		present := s.hasPresentLocked(b.hex)
		var st *stream
		if f := s.inflight[b.digest]; f != nil {
			st = f.stream
		}
		listed := s.pins[b.digest] > 0 && len(s.pulling) > 0
		changed := s.changed
		s.mu.Unlock()
		if present {
			s.serveFile(w, r, b.hex, b.digest, "application/octet-stream", "BLOB_UNKNOWN")
			return
		}
		if st != nil {
			if _, state, _ := st.servable(); state != failed && s.follow(w, r, b, st) {
				return
			}
		}
		wait := unknown
		if listed || st != nil {
			wait = nil // a pull in progress will fetch it: wait for it
		}
		select {
		case <-changed:
		case <-wait:
			ociError(w, http.StatusNotFound, "BLOB_UNKNOWN", "unknown "+b.digest)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// hasPresentLocked reports whether a committed blob file is there.
func (s *Store) hasPresentLocked(hex string) bool {
	info, err := os.Stat(s.blobPath(hex))
	return err == nil && info.Mode().IsRegular()
}

// follow streams a blob from its temporary file as it is written, never
// past what st lets through (the last byte only once verified); a stream
// that fails is cut off, so the client sees a truncated body. It returns
// false, having written nothing, when the file is already gone.
func (s *Store) follow(w http.ResponseWriter, r *http.Request, b blob, st *stream) bool {
	f, err := os.Open(st.path)
	if err != nil {
		return false // removed: failed, or committed (the next look finds it)
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Docker-Content-Digest", b.digest)
	w.Header().Set("Content-Length", fmt.Sprint(st.size))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return true
	}
	out := &countingResponse{ResponseWriter: w, n: &s.served}
	rc := http.NewResponseController(w)
	var off int64
	for off < st.size {
		n, state, changed := st.servable()
		if state == failed {
			// Cut off: the client must not take what it got for a blob.
			panic(http.ErrAbortHandler)
		}
		if off < n {
			// The file's own offset, read sequentially: net/http sends
			// an *os.File's bytes by sendfile, with no copy through here.
			m, err := io.Copy(out, io.LimitReader(f, n-off))
			off += m
			if err != nil {
				return true // the client went away
			}
			rc.Flush() //nolint:errcheck // a client gone shows at the next write
			continue
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return true
		}
	}
	return true
}

func ociError(w http.ResponseWriter, status int, code, message string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"errors":[{"code":%q,"message":%q}]}`, code, message)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(b.Len()))
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

type counter interface{ Add(int64) int64 }

// countingResponse counts body bytes; ReadFrom keeps net/http's sendfile
// path for blobs.
type countingResponse struct {
	http.ResponseWriter
	n counter
}

func (c *countingResponse) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *countingResponse) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingResponse) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(c.ResponseWriter, r)
	c.n.Add(n)
	return n, err
}
