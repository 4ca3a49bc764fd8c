package gittest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
)

// PackServer speaks Git's smart HTTP protocol (upload-pack, protocol
// version 0, no capabilities but the HEAD symref) for one pack, whatever
// it holds: every repository path advertises refs/heads/main (and HEAD) at
// Commit, and every fetch is answered with Pack, as it is. A test stands
// it in for a Git host to take a crafted pack through a real fetch, which
// git itself would refuse to serve (git upload-pack resolves what it
// sends).
type PackServer struct {
	Pack   []byte
	Commit plumbing.Hash
	// Requests counts the requests served.
	Requests atomic.Int64
}

func (s *PackServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") &&
		r.URL.Query().Get("service") == "git-upload-pack":
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		io.WriteString(w, PktLine("# service=git-upload-pack\n")+"0000")
		io.WriteString(w, PktLine(s.Commit.String()+" HEAD\x00symref=HEAD:refs/heads/main agent=gittest\n"))
		io.WriteString(w, PktLine(s.Commit.String()+" refs/heads/main\n")+"0000")
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
		// The wants and haves do not matter: the answer is the pack.
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		io.WriteString(w, PktLine("NAK\n"))
		w.Write(s.Pack)
	default:
		http.NotFound(w, r)
	}
}

// PktLine encodes payload as a pkt-line.
func PktLine(payload string) string {
	return fmt.Sprintf("%04x%s", len(payload)+4, payload)
}
