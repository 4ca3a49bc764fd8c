package forge

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// Kind tells API requests from git ones. It is used by request counting,
// the request log and fault matching.
type Kind int

const (
	// Any matches both kinds (faults only).
	Any Kind = iota
	// API is a REST request: any path under /api/.
	API
	// Git is every other request: smart HTTP under /{owner}/{name}[.git]/...
	Git
)

func (k Kind) String() string {
	switch k {
	case Any:
		return "any"
	case API:
		return "api"
	case Git:
		return "git"
	}
	return "Kind(?)"
}

// Request is one entry of the request log.
type Request struct {
	Kind   Kind
	Method string
	Path   string // URL path as received
	Query  string // raw query string
	Status int    // status sent to the client
}

// stats holds the request counters and a bounded log of recent requests.
type stats struct {
	api, git atomic.Int64

	mu sync.Mutex
	// fetches counts upload-pack requests by repository ("owner/name").
	fetches map[string]Fetches
	ring    []Request // circular buffer of capacity max
	next    int       // index of the next write
	full    bool
	max     int
}

func (s *stats) init(max int) {
	s.max = max
	s.ring = make([]Request, 0, min(max, 1024))
}

func (s *stats) count(k Kind) {
	if k == API {
		s.api.Add(1)
	} else {
		s.git.Add(1)
	}
}

func (s *stats) log(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) < s.max {
		s.ring = append(s.ring, r)
		return
	}
	s.ring[s.next] = r
	s.next = (s.next + 1) % s.max
	s.full = true
}

func (s *stats) snapshot() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, len(s.ring))
	if s.full {
		out = append(out, s.ring[s.next:]...)
		out = append(out, s.ring[:s.next]...)
	} else {
		out = append(out, s.ring...)
	}
	return out
}

func (s *stats) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.api.Store(0)
	s.git.Store(0)
	s.ring = s.ring[:0]
	s.fetches = nil
	s.next = 0
	s.full = false
}

// APIRequests is the number of API requests received since start or the last
// ResetCounts, including redirected, rejected and faulted ones.
func (f *Forge) APIRequests() int64 { return f.stats.api.Load() }

// GitRequests is the number of non-API (git smart HTTP) requests received
// since start or the last ResetCounts.
func (f *Forge) GitRequests() int64 { return f.stats.git.Load() }

// ResetCounts zeroes both counters and empties the request log. It does not
// touch the rate-limit window (see ResetRateLimit).
func (f *Forge) ResetCounts() { f.stats.reset() }

// Requests returns the most recent requests (up to Options.RequestLogSize),
// oldest first. An entry is recorded when its response header is sent.
func (f *Forge) Requests() []Request { return f.stats.snapshot() }

// Fetches counts the fetches (upload-pack requests) of one repository.
type Fetches struct {
	// Full fetches sent no "have" line and asked for whole histories: a
	// clone, everything from scratch.
	Full int
	// Incremental fetches said what the client has.
	Incremental int
	// Shallow fetches asked for a depth ("deepen"), with no "have": one
	// commit's tree or a few, not a clone.
	Shallow int
}

func (s *stats) fetched(repo string, body []byte, encoding string) {
	k := fetchKind(body, encoding)
	if !k.wants {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetches == nil {
		s.fetches = map[string]Fetches{}
	}
	n := s.fetches[repo]
	switch {
	case k.haves:
		n.Incremental++
	case k.deepens:
		n.Shallow++
	default:
		n.Full++
	}
	s.fetches[repo] = n
}

// Fetches is the upload-pack requests (fetches and clones) each repository
// ("owner/name", its name when asked) has served since start or the last
// ResetCounts: full ones (no "have": a clone) apart from incremental ones.
// A client that wants nothing (up to date, or listing refs) is not
// counted.
func (f *Forge) Fetches() map[string]Fetches {
	f.stats.mu.Lock()
	defer f.stats.mu.Unlock()
	out := make(map[string]Fetches, len(f.stats.fetches))
	for k, v := range f.stats.fetches {
		out[k] = v
	}
	return out
}

// fetchLines is what an upload-pack request asks for.
type fetchLines struct {
	// wants: it fetches (protocol v2's ls-refs has no "want" line);
	// haves: it says what the client has; deepens: it asks for a depth.
	wants, haves, deepens bool
}

// fetchKind reads an upload-pack request body (pkt-lines, gzip when
// encoding says so).
func fetchKind(body []byte, encoding string) (k fetchLines) {
	if encoding == "gzip" || encoding == "x-gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return k
		}
		if body, err = io.ReadAll(io.LimitReader(zr, maxBufferedBody)); err != nil {
			return k
		}
	}
	for len(body) >= 4 {
		n, err := strconv.ParseUint(string(body[:4]), 16, 16)
		if err != nil {
			break
		}
		if n < 4 { // flush, delimiter or end: no payload
			body = body[4:]
			continue
		}
		if int(n) > len(body) {
			break
		}
		line := body[4:n]
		k.wants = k.wants || bytes.HasPrefix(line, []byte("want "))
		k.haves = k.haves || bytes.HasPrefix(line, []byte("have "))
		k.deepens = k.deepens || bytes.HasPrefix(line, []byte("deepen"))
		body = body[n:]
	}
	return k
}
