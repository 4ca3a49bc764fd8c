package forge

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault describes trouble to inject into matching requests before they are
// served normally. A request matches when its kind, method and path match;
// every matching fault is applied in the order faults were added: Before
// hooks run, latencies add up, and the first fault that produces a response
// (Status, RateLimit or RetryAfter) answers the request instead of the
// normal handler.
type Fault struct {
	Kind   Kind           // API, Git or Any
	Method string         // "" = any method
	Path   string         // prefix of the URL path ("/api/v3/repos/o/r"); "" = any
	PathRE *regexp.Regexp // if set, used instead of Path (matched against the URL path)

	Latency time.Duration // delay before serving (cut short if the client goes away)

	// Status forces this HTTP status with a GitHub-like body (JSON for API
	// requests, text for git). 0 leaves the response alone unless RateLimit
	// or RetryAfter is set.
	Status int
	// RateLimit answers with GitHub's primary rate-limit response: 403 (or
	// Status if set), X-RateLimit-Remaining: 0, X-RateLimit-Reset = now +
	// ResetIn, message "API rate limit exceeded for ...".
	RateLimit bool
	// ResetIn is how far in the future the primary rate limit resets.
	// Default one minute.
	ResetIn time.Duration
	// RetryAfter > 0 answers with GitHub's secondary rate-limit response: 403
	// (or Status if set), Retry-After in whole seconds (rounded up), message
	// "You have exceeded a secondary rate limit ...".
	RetryAfter time.Duration

	// Headers are set on the answer this fault gives (any of the above),
	// e.g. a Retry-After on a 429 or a 502, or X-RateLimit-Remaining: 0 on
	// a 429.
	Headers http.Header
	// Message, if set, is the answer's message, and the answer carries no
	// documentation link (how GitHub's secondary limits can look: a bare
	// 403 with Retry-After).
	Message string

	// Times limits the fault to the next Times matching requests; 0 means
	// until removed.
	Times int
	// Before, if set, runs before the request is served (after any latency
	// is decided, before it is slept). It may call the Forge's methods, e.g.
	// rename the repository in the middle of a sequence of requests.
	Before func(r *http.Request)
}

type activeFault struct {
	Fault
	id   uint64
	left int // remaining uses when Times > 0
}

type faultSet struct {
	mu     sync.Mutex
	nextID uint64
	list   []*activeFault
}

func (ft *Fault) matches(r *http.Request, kind Kind) bool {
	if ft.Kind != Any && ft.Kind != kind {
		return false
	}
	if ft.Method != "" && !strings.EqualFold(ft.Method, r.Method) {
		return false
	}
	if ft.PathRE != nil {
		return ft.PathRE.MatchString(r.URL.Path)
	}
	return strings.HasPrefix(r.URL.Path, ft.Path)
}

func (ft *Fault) responds() bool {
	return ft.Status != 0 || ft.RateLimit || ft.RetryAfter > 0
}

// AddFault installs a fault and returns a function that removes it (safe to
// call more than once). A fault with Times > 0 also removes itself after its
// last use.
func (f *Forge) AddFault(ft Fault) (remove func()) {
	s := &f.faults
	s.mu.Lock()
	s.nextID++
	af := &activeFault{Fault: ft, id: s.nextID, left: ft.Times}
	s.list = append(s.list, af)
	s.mu.Unlock()
	return func() { s.remove(af.id) }
}

// ClearFaults removes every fault.
func (f *Forge) ClearFaults() {
	f.faults.mu.Lock()
	f.faults.list = nil
	f.faults.mu.Unlock()
}

func (s *faultSet) remove(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, af := range s.list {
		if af.id == id {
			s.list = append(s.list[:i:i], s.list[i+1:]...)
			return
		}
	}
}

// take returns the faults matching r, consuming one use of each.
func (s *faultSet) take(r *http.Request, kind Kind) []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Fault
	kept := s.list[:0:0]
	for _, af := range s.list {
		if af.matches(r, kind) {
			out = append(out, af.Fault)
			if af.Times > 0 {
				af.left--
				if af.left <= 0 {
					continue // used up: drop it
				}
			}
		}
		kept = append(kept, af)
	}
	s.list = kept
	return out
}

// applyFaults runs the faults matching r. It reports whether it answered
// the request.
func (f *Forge) applyFaults(w http.ResponseWriter, r *http.Request, kind Kind) bool {
	faults := f.faults.take(r, kind)
	if len(faults) == 0 {
		return false
	}
	var latency time.Duration
	var answer *Fault
	for i := range faults {
		ft := &faults[i]
		latency += ft.Latency
		if answer == nil && ft.responds() {
			answer = ft
		}
	}
	for _, ft := range faults {
		if ft.Before != nil {
			ft.Before(r)
		}
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	if answer == nil {
		return false
	}
	for k, vs := range answer.Headers {
		w.Header()[http.CanonicalHeaderKey(k)] = vs
	}
	if answer.Message != "" {
		writeStatus(w, kind, cmp0(answer.Status, http.StatusForbidden), answer.Message, "")
		return true
	}
	switch {
	case answer.RateLimit:
		f.primaryRateLimit(w, r, kind, answer)
	case answer.RetryAfter > 0:
		f.secondaryRateLimit(w, kind, answer)
	default:
		writeStatus(w, kind, answer.Status, http.StatusText(answer.Status), docsURL)
	}
	return true
}

func (f *Forge) primaryRateLimit(w http.ResponseWriter, r *http.Request, kind Kind, ft *Fault) {
	status := cmp0(ft.Status, http.StatusForbidden)
	resetIn := ft.ResetIn
	if resetIn <= 0 {
		resetIn = time.Minute
	}
	f.writeRateLimited(w, r, kind, status, time.Now().Add(resetIn))
}

// writeRateLimited writes GitHub's primary rate-limit response.
func (f *Forge) writeRateLimited(w http.ResponseWriter, r *http.Request, kind Kind, status int, reset time.Time) {
	h := w.Header()
	limit := f.opts.RateLimit
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(float64(reset.UnixNano())/1e9)), 10))
	h.Set("X-RateLimit-Used", strconv.Itoa(limit))
	h.Set("X-RateLimit-Resource", "core")
	who := r.RemoteAddr
	if host, _, err := net.SplitHostPort(who); err == nil {
		who = host
	}
	msg := fmt.Sprintf("API rate limit exceeded for %s. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)", who)
	if f.authenticated(r) {
		msg = "API rate limit exceeded for user ID 1."
	}
	writeStatus(w, kind, status, msg, "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit")
}

func (f *Forge) secondaryRateLimit(w http.ResponseWriter, kind Kind, ft *Fault) {
	status := cmp0(ft.Status, http.StatusForbidden)
	secs := int64(math.Ceil(ft.RetryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeStatus(w, kind, status,
		"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.",
		"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits")
}

// writeStatus answers with a GitHub-style error: JSON for API requests,
// plain text for git ones.
func writeStatus(w http.ResponseWriter, kind Kind, status int, message, doc string) {
	if kind == API {
		writeJSON(w, status, errorBody{Message: message, DocumentationURL: doc, Status: strconv.Itoa(status)})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintln(w, message)
}

func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// GoDown takes the whole forge off the network, API and Git alike, as a
// host that is down: nothing listens at its address (connections are
// refused) and open connections are cut. The returned up serves again at
// the same address. Tests that use it must not run in parallel with
// others of the same forge.
func (f *Forge) GoDown() (up func() error, err error) {
	if f.srv == nil {
		return nil, errors.New("forge: not started")
	}
	addr := f.ln.Addr().String()
	if err := f.srv.Close(); err != nil {
		return nil, err
	}
	return func() error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("forge: listen again: %w", err)
		}
		f.ln = ln
		f.srv = &http.Server{Handler: f.handler, ReadHeaderTimeout: 30 * time.Second}
		srv := f.srv
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				f.logf("forge: serve: %v", err)
			}
		}()
		return nil
	}, nil
}

// Refusals GitHub answers a personal token an organization does not admit
// (403, not a rate limit).
const (
	SAMLMessage        = "Resource protected by organization SAML enforcement. You must grant your Personal Access token access to this organization."
	IPAllowListMessage = "Although you appear to have the correct authorization credentials, the `%s` organization has an IP allow list enabled, and your IP address is not permitted to access this resource."
)

// EnforceSAML makes an organization answer its API paths (/orgs/ORG/...,
// /repos/ORG/...) as GitHub answers a token not authorized for the
// organization's SAML single sign-on: 403, GitHub's message and the
// X-GitHub-SSO header naming where to authorize it. remove lifts it.
func (f *Forge) EnforceSAML(org string) (remove func()) {
	return f.AddFault(Fault{Kind: API, PathRE: orgPaths(org), Status: http.StatusForbidden, Message: SAMLMessage,
		Headers: http.Header{"X-Github-Sso": {"required; url=" + f.URL() + "/orgs/" + org + "/sso?authorization_request=AZSCKtL4U8yX1H3sCQIVnVgmjmon5fWxks5YrqhJgah0b2tlbl9pZM4EuMz4"}}})
}

// EnforceIPAllowList makes an organization refuse its API paths as
// GitHub does for an address its IP allow list does not admit.
func (f *Forge) EnforceIPAllowList(org string) (remove func()) {
	return f.AddFault(Fault{Kind: API, PathRE: orgPaths(org), Status: http.StatusForbidden, Message: fmt.Sprintf(IPAllowListMessage, org)})
}

func orgPaths(org string) *regexp.Regexp {
	return regexp.MustCompile(`^/api/v3/(orgs|repos)/(?i:` + regexp.QuoteMeta(org) + `)(/|$)`)
}
