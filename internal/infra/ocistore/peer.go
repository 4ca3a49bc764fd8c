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
		s.serveFile(w, r, hex, ref, "application/octet-stream", "BLOB_UNKNOWN")
		return
	}
	digest, mediaType, ok := s.lookupManifest(ref)
	if !ok {
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
