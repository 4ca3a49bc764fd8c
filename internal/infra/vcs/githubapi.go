package vcs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/metrics"
)

// UserAgent is what gitfleet calls itself to GitHub, as GitHub asks API
// clients to: gitfleet/<module version>.
var UserAgent = func() string {
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return "gitfleet/" + v
}()

// apiTransport sends every API request as GitHub documents them today:
// gitfleet's User-Agent, the stable media type (go-github still asks for
// preview types GitHub has retired) and the REST API version. The token
// goes to the API's own origin only: go-github adds it in a transport
// around this one, where Go's client, which drops credentials from a
// request redirected to another host, cannot see it, so this transport
// drops it from any request that is not for the API (and the client
// follows no redirect out of it: see sameOriginRedirects).
type apiTransport struct {
	base http.RoundTripper
	api  *url.URL
}

func (t apiTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if !sameOrigin(t.api, r.URL) {
		r.Header.Del("Authorization")
	}
	r.Header.Set("User-Agent", UserAgent)
	r.Header.Set("Accept", "application/vnd.github+json")
	r.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	return t.base.RoundTrip(r)
}

// NewClient is a go-github client for h's API authenticated with token
// (a user's, an installation's, or an App's JWT), with the transport and
// redirect policy of every client of this package: see newClient.
func NewClient(h Host, token string, httpClient *http.Client) (*github.Client, error) {
	return newClient(h, token, httpClient)
}

// newClient is a go-github client for h's API authenticated with token.
// A token never goes to a plain-http API that is not on this machine unless
// the host allows it explicitly.
func newClient(h Host, token string, httpClient *http.Client) (*github.Client, error) {
	if token != "" && !h.AllowPlainHTTPToken {
		if err := tokenSafe(h.APIURL); err != nil {
			return nil, err
		}
	}
	api, err := url.Parse(h.APIURL)
	if err != nil {
		return nil, errclass.Permanentf(errclass.ReasonInvalidInput, "API URL %q: %v", h.APIURL, err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if httpClient != nil {
		cp := *httpClient
		hc = &cp
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = apiTransport{base: base, api: api}
	hc.CheckRedirect = sameOriginRedirects
	c := github.NewClient(hc)
	if !strings.EqualFold(h.APIURL, "https://api.github.com/") {
		var err error
		if c, err = c.WithEnterpriseURLs(h.APIURL, h.APIURL); err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
	}
	if token != "" {
		c = c.WithAuthToken(token)
	}
	return c, nil
}

// sameOriginRedirects is the API client's CheckRedirect: a redirect is
// followed only within the origin (scheme, host and port) of the request
// (GitHub's 301 for a renamed repository stays on the API); one to another
// host, or from https to http, is refused before anything is sent there.
// Permanent: the API answers the same way next time.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errclass.Permanentf(errclass.ReasonUnsupported, "more than 10 redirects")
	}
	if !sameOrigin(via[0].URL, req.URL) {
		return errclass.Permanentf(errclass.ReasonUnsupported, "the API redirects to another origin (%s://%s): not followed", req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// tokenSafe refuses plain http unless the API is on a loopback address.
func tokenSafe(apiURL string) error {
	u, err := url.Parse(apiURL)
	if err != nil {
		return fmt.Errorf("API URL %q: %w", apiURL, err)
	}
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return nil
	}
	return errclass.Permanentf(errclass.ReasonInvalidInput,
		"refusing to send a token to %s over plain http (set %s=1 to allow it)", u.Host, EnvAllowPlainHTTPToken)
}

// EnvAllowPlainHTTPToken allows tokens over plain http to a non-loopback API.
const EnvAllowPlainHTTPToken = "GITFLEET_ALLOW_PLAIN_HTTP_TOKEN"

// Account is a GitHub API client acting as one user (their token), for
// reading what that account sees. It honours GitHub's limits per token,
// across every Account of the process: at most a bounded number of requests
// in flight, and none at all while a rate limit holds.
type Account struct {
	host  Host
	token string
	http  *http.Client
	gate  *tokenGate
}

// newClient is a fresh go-github client for one call: go-github remembers
// rate limits per client, on the wall clock; the token's gate keeps them
// for every client of the process instead (on an injectable clock).
func (a *Account) newClient() (*github.Client, error) { return newClient(a.host, a.token, a.http) }

// AccountOptions tunes an Account.
type AccountOptions struct {
	// HTTPClient may be nil.
	HTTPClient *http.Client
	// MaxConcurrent bounds the token's requests in flight (default 10).
	MaxConcurrent int
	// Now is the clock for rate-limit waits; nil means time.Now.
	Now func() time.Time
}

// NewAccount returns a client of h's API acting with token.
func NewAccount(h Host, token string, o AccountOptions) (*Account, error) {
	if token == "" {
		return nil, errclass.Permanentf(errclass.ReasonInvalidInput, "no token")
	}
	a := &Account{host: h, token: token, http: o.HTTPClient, gate: gateFor(token, o)}
	if _, err := a.newClient(); err != nil {
		return nil, err
	}
	return a, nil
}

// Whoami is GET /user: the account's login and id. A rejected token is
// Permanent and says what to do.
func (a *Account) Whoami(ctx context.Context) (login string, id int64, err error) {
	client, err := a.newClient()
	if err != nil {
		return "", 0, err
	}
	var u *github.User
	err = a.gate.do(ctx, "/user", func() (*github.Response, error) {
		var resp *github.Response
		var err error
		u, resp, err = client.Users.Get(ctx, "")
		return resp, err
	})
	if err != nil {
		return "", 0, err
	}
	return u.GetLogin(), u.GetID(), nil
}

// ListOptions says what FetchList may reuse, and whom it tells.
type ListOptions struct {
	// Stored are the pages stored last, by URL: their validators make
	// each request conditional.
	Stored map[string]ghaccount.Page
	// FreshSince: a stored page fetched at or after it is taken as it is,
	// without a request, so a retried refresh resumes where the attempt
	// before it stopped (zero: none is).
	FreshSince time.Time
	// Fetched, if set, is told each page fetched (a 304 too) before the
	// next is asked for; its error ends the list.
	Fetched func(ghaccount.Page) error
}

// maxListPages bounds a list's pages (a million repositories at 100 to a
// page, twice over): a server that links page after page ends with an
// error, not a loop. A variable for the test.
var maxListPages = 20000

// FetchList fetches every page of a list endpoint (path relative to the API
// base, e.g. "user/repos?affiliation=owner"), 100 to a page, each with the
// validators of the stored page at its URL: a 304 reuses the stored page
// (and, on GitHub, costs no quota). It returns the pages in order and how
// many were unchanged. Nothing is returned unless every page was fetched.
func (a *Account) FetchList(ctx context.Context, endpoint, path string, o ListOptions) ([]ghaccount.Page, int, error) {
	next := firstPage(path)
	client, err := a.newClient()
	if err != nil {
		return nil, 0, err
	}
	var pages []ghaccount.Page
	unchanged := 0
	seen := map[string]bool{}
	for next != "" {
		if seen[next] || len(seen) == maxListPages {
			return nil, 0, errclass.Permanentf(errclass.ReasonUnsupported, "%s: pagination loops or runs past %d pages at %s", endpoint, maxListPages, next)
		}
		seen[next] = true
		old := o.Stored[next]
		if len(old.Body) > 0 && !o.FreshSince.IsZero() && !old.FetchedAt.Before(o.FreshSince) {
			pages = append(pages, old)
			next = old.Next
			continue
		}
		page, notModified, err := a.fetchPage(ctx, client, endpoint, next, old)
		if err != nil {
			return nil, 0, err
		}
		if notModified {
			unchanged++
		}
		page.FetchedAt = a.gate.clock().UTC()
		if o.Fetched != nil {
			if err := o.Fetched(page); err != nil {
				return nil, 0, err
			}
		}
		pages = append(pages, page)
		next = page.Next
	}
	return pages, unchanged, nil
}

// firstPage is the URL of a list's first page, as FetchList asks for it.
func firstPage(path string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "per_page=100"
}

// StoredList returns the pages of a list FetchList stored last, in order,
// as far as they are stored.
func StoredList(path string, stored map[string]ghaccount.Page) []ghaccount.Page {
	var pages []ghaccount.Page
	seen := map[string]bool{}
	for next := firstPage(path); next != "" && !seen[next]; {
		p, ok := stored[next]
		if !ok {
			break
		}
		seen[next] = true
		pages = append(pages, p)
		next = p.Next
	}
	return pages
}

func (a *Account) fetchPage(ctx context.Context, client *github.Client, endpoint, u string, old ghaccount.Page) (ghaccount.Page, bool, error) {
	req, err := client.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return ghaccount.Page{}, false, errclass.Permanentf(errclass.ReasonInvalidInput, "%s: %v", endpoint, err)
	}
	if len(old.Body) > 0 {
		if old.ETag != "" {
			req.Header.Set("If-None-Match", old.ETag)
		} else if old.LastModified != "" {
			req.Header.Set("If-Modified-Since", old.LastModified)
		}
	}
	var page ghaccount.Page
	notModified := false
	err = a.gate.do(ctx, endpoint, func() (*github.Response, error) {
		resp, err := client.BareDo(ctx, req)
		if resp != nil && resp.StatusCode == http.StatusNotModified && len(old.Body) > 0 {
			notModified = true
			page = old
			return resp, nil
		}
		if err != nil {
			return resp, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes))
		if err != nil {
			return resp, err
		}
		page = ghaccount.Page{URL: u, ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"), Body: body}
		if resp.NextPage != 0 {
			page.Next = withPage(u, resp.NextPage)
		}
		return resp, nil
	})
	return page, notModified, err
}

// withPage is u with its page parameter set: the next page's URL in the
// same form as the first, so stored pages are found by it.
func withPage(u string, page int) string {
	path, query, _ := strings.Cut(u, "?")
	q, _ := url.ParseQuery(query)
	q.Set("page", fmt.Sprint(page))
	return path + "?" + q.Encode()
}

// maxPageBytes bounds one page (100 repositories take about 600 KB).
const maxPageBytes = 16 << 20

// ParseRepos reads a page of a repository list.
func ParseRepos(p ghaccount.Page) ([]ghaccount.Repo, error) {
	var rs []*github.Repository
	if err := json.Unmarshal(p.Body, &rs); err != nil {
		return nil, errclass.Wrap(errclass.Retryable, "bad response", fmt.Errorf("a repository page is not JSON: %w", err))
	}
	out := make([]ghaccount.Repo, 0, len(rs))
	for _, r := range rs {
		if r.GetID() == 0 || r.GetOwner().GetLogin() == "" {
			return nil, errclass.Wrap(errclass.Retryable, "bad response", errors.New("a repository without id or owner"))
		}
		source := ghaccount.Personal
		if r.GetOwner().GetType() == "Organization" {
			source = ghaccount.Organization
		}
		vis := r.GetVisibility()
		if vis == "" {
			vis = map[bool]string{true: "private", false: "public"}[r.GetPrivate()]
		}
		out = append(out, ghaccount.Repo{ID: r.GetID(), Owner: r.GetOwner().GetLogin(), OwnerID: r.GetOwner().GetID(),
			Name: r.GetName(), Source: source, Visibility: vis, DefaultBranch: r.GetDefaultBranch(),
			Archived: r.GetArchived(), Fork: r.GetFork(), PushedAt: r.GetPushedAt().Time})
	}
	return out, nil
}

// ParseOrgs reads a page of an organization list.
func ParseOrgs(p ghaccount.Page) ([]ghaccount.Org, error) {
	var os []*github.Organization
	if err := json.Unmarshal(p.Body, &os); err != nil {
		return nil, errclass.Wrap(errclass.Retryable, "bad response", fmt.Errorf("an organization page is not JSON: %w", err))
	}
	out := make([]ghaccount.Org, 0, len(os))
	for _, o := range os {
		if o.GetID() == 0 || o.GetLogin() == "" {
			return nil, errclass.Wrap(errclass.Retryable, "bad response", errors.New("an organization without id or login"))
		}
		out = append(out, ghaccount.Org{ID: o.GetID(), Login: o.GetLogin(), Description: o.GetDescription()})
	}
	return out, nil
}

// tokenGate holds one token's limits for the whole process.
type tokenGate struct {
	slots chan struct{}
	now   func() time.Time

	mu           sync.Mutex
	blockedUntil time.Time
}

var (
	gatesMu sync.Mutex
	gates   = map[string]*tokenGate{}
)

// gateFor returns the token's gate, keyed by a digest (the map never holds
// a token).
func gateFor(token string, o AccountOptions) *tokenGate {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	gatesMu.Lock()
	defer gatesMu.Unlock()
	g, ok := gates[key]
	if !ok {
		n := o.MaxConcurrent
		if n <= 0 {
			n = 10
		}
		g = &tokenGate{slots: make(chan struct{}, n)}
		gates[key] = g
	}
	g.mu.Lock()
	g.now = o.Now
	if g.now == nil {
		g.now = time.Now
	}
	g.mu.Unlock()
	return g
}

// clock reads the gate's clock.
func (g *tokenGate) clock() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now()
}

// do runs one request within the token's limits: none while a rate limit
// holds (a Retryable error until it lifts), a bounded number at once, and a
// rate-limit answer holds every later request of the token. endpoint is a
// path pattern ("/user/repos", "/orgs/{org}/repos"): it names requests in
// errors and metrics without naming anyone.
func (g *tokenGate) do(ctx context.Context, endpoint string, send func() (*github.Response, error)) error {
	g.mu.Lock()
	wait := g.blockedUntil.Sub(g.now())
	g.mu.Unlock()
	if wait > 0 {
		metrics.GitHubRateLimitWaits.Inc()
		return &errclass.Error{Class: errclass.Retryable, Reason: errclass.ReasonRateLimited, RetryAfter: wait,
			Err: fmt.Errorf("%s: rate limited for another %s; no request sent", endpoint, wait.Round(time.Second))}
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	resp, err := send()
	<-g.slots
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	metrics.GitHubRequests.Inc(endpoint, strconv.Itoa(status))
	if status == http.StatusNotModified {
		metrics.GitHubNotModified.Inc()
	}
	if err == nil {
		return nil
	}
	c := errclass.Classify(err)
	if c.Reason == errclass.ReasonRateLimited {
		if c.RetryAfter <= 0 {
			c.RetryAfter = time.Minute // a limit that says nothing of when: GitHub says wait a minute
		}
		g.mu.Lock()
		if until := g.now().Add(c.RetryAfter); until.After(g.blockedUntil) {
			g.blockedUntil = until
		}
		g.mu.Unlock()
	}
	var gh *github.ErrorResponse
	if errors.As(err, &gh) && gh.Response != nil && gh.Response.StatusCode == http.StatusUnauthorized {
		return errclass.Wrap(errclass.Permanent, errclass.ReasonPermissionDenied,
			fmt.Errorf("%s: %w: run `starter users add` again with a valid token", endpoint, ErrTokenRejected))
	}
	return &errclass.Error{Class: c.Class, Reason: c.Reason, RetryAfter: c.RetryAfter, Err: fmt.Errorf("%s: %w", endpoint, err)}
}

// ErrTokenRejected is an account's token refused by GitHub itself (401:
// expired, revoked, mistyped).
var ErrTokenRejected = errors.New("GitHub rejected the token (401)")

// Forbidden reports a 403 that is not a rate limit (an organization's
// SAML single sign-on or IP allow list refusing the token, a missing
// scope) and GitHub's message with it.
func Forbidden(err error) (message string, ok bool) {
	var gh *github.ErrorResponse
	if !errors.As(err, &gh) || gh.Response == nil || gh.Response.StatusCode != http.StatusForbidden {
		return "", false
	}
	if c := errclass.Classify(err); c != nil && c.Reason == errclass.ReasonRateLimited {
		return "", false
	}
	return gh.Message, true
}
