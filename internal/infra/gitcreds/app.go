package gitcreds

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/vcs"
)

// ErrNotInstalled is the App's answer for an owner it is not installed on.
var ErrNotInstalled = errors.New("the App is not installed")

// App mints installation access tokens of a GitHub App on one host.
type App struct {
	host  vcs.Host
	id    int64
	key   *rsa.PrivateKey
	http  *http.Client
	now   func() time.Time
	slots int

	// listMu serialises listings of the App's installations, so a burst
	// of fetches after the listing expired lists once.
	listMu sync.Mutex

	mu     sync.Mutex
	owners map[string]int64 // lower-cased account → installation, as last listed
	listed time.Time        // when (zero: list again)
	insts  map[int64]*installation
}

// installation is one installation's token and rate gate. mu serialises
// its mints, so a burst of fetches mints one token.
type installation struct {
	id      int64
	account string
	gate    *gate
	// securityEvents is the installation's security_events permission as
	// last listed (under App.mu): code scanning needs "write".
	securityEvents string

	mu      sync.Mutex
	token   string
	expires time.Time
	renewAt time.Time
}

// How long the listing of the App's installations is trusted: an owner
// found in it for ownerTTL, one missing from it for noOwnerTTL (an App
// installed since is seen that soon); a token refused, or an installation
// gone when a token is minted, lists again at once. One listing (GET
// /app/installations) answers for every owner, so fetches cost no API
// request of their own.
const (
	ownerTTL   = 10 * time.Minute
	noOwnerTTL = 30 * time.Second
	// renewBefore is how long before its expiry a token is replaced (an
	// hour-long token at 55 minutes); a shorter-lived one at three
	// quarters of its life.
	renewBefore = 5 * time.Minute
)

// AppOptions tunes an App.
type AppOptions struct {
	// HTTPClient may be nil.
	HTTPClient *http.Client
	// Now is the clock tokens are renewed and JWTs signed on; nil means
	// time.Now.
	Now func() time.Time
	// MaxConcurrent bounds each installation's API requests in flight
	// (default 10).
	MaxConcurrent int
}

// NewApp returns the App id with its private key on host h. A key is
// sent nowhere, and a token never goes to a plain-http API that is not on
// this machine (vcs.NewClient refuses it).
func NewApp(h vcs.Host, id int64, key *rsa.PrivateKey, o AppOptions) (*App, error) {
	if id <= 0 || key == nil {
		return nil, errors.New("a GitHub App needs its id and private key")
	}
	if _, err := vcs.NewClient(h, "jwt", o.HTTPClient); err != nil {
		return nil, err
	}
	a := &App{host: h, id: id, key: key, http: o.HTTPClient, now: o.Now, slots: o.MaxConcurrent,
		owners: map[string]int64{}, insts: map[int64]*installation{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.slots <= 0 {
		a.slots = 10
	}
	return a, nil
}

// Kind names the source in messages.
func (a *App) Kind() string { return fmt.Sprintf("the GitHub App (id %d)", a.id) }

// asApp is a client authenticated as the App itself.
func (a *App) asApp() (*github.Client, error) {
	jwt, err := signJWT(a.key, a.id, a.now())
	if err != nil {
		return nil, err
	}
	return vcs.NewClient(a.host, jwt, a.http)
}

// Token returns an installation access token that reads owner's
// repositories: the cached one, or one minted now when none is left or it
// expires within renewBefore. An owner without an installation is
// ErrNotInstalled ("the App is not installed on acme").
func (a *App) Token(ctx context.Context, owner string) (string, error) {
	in, err := a.installationOf(ctx, owner)
	if err != nil {
		return "", err
	}
	return a.tokenOf(ctx, in)
}

func (a *App) tokenOf(ctx context.Context, in *installation) (string, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.token != "" && a.now().Before(in.renewAt) {
		return in.token, nil
	}
	c, err := a.asApp()
	if err != nil {
		return "", err
	}
	var tok mintedToken
	err = in.gate.do(ctx, func() (*github.Response, error) {
		req, err := c.NewRequest("POST", fmt.Sprintf("app/installations/%d/access_tokens", in.id), tokenRequest)
		if err != nil {
			return nil, err
		}
		return c.Do(ctx, req, &tok)
	})
	if err != nil {
		if c := errclass.Classify(err); c.Reason == errclass.ReasonNotFound {
			// Removed since it was found: find it again next time.
			a.forget(in.account)
			return "", fmt.Errorf("%w on %s", ErrNotInstalled, in.account)
		}
		return "", fmt.Errorf("mint a token of the App's installation on %s: %w", in.account, err)
	}
	if beyond := tokenBeyond(readAsked, tok.Permissions); beyond != "" {
		// Neither cached nor used, and revoked (best effort: it would
		// otherwise stay live for its hour).
		a.revoke(ctx, tok.Token)
		return "", errclass.Wrap(errclass.Permanent, ReasonCredentials, fmt.Errorf(
			"%s's installation on %s granted a token more than gitfleet asked for (%s): %s; "+
				"gitfleet uses no token that could change a repository: give the App only read access to contents and metadata",
			a.Kind(), in.account, askedPermissions, beyond))
	}
	now := a.now()
	exp := tok.ExpiresAt.Time
	if tok.Token == "" || exp.IsZero() || !exp.After(now) {
		return "", errclass.Wrap(errclass.Retryable, "bad response",
			fmt.Errorf("the App's installation token for %s expires at %v", in.account, exp))
	}
	early := min(renewBefore, exp.Sub(now)/4)
	in.token, in.expires, in.renewAt = tok.Token, exp, exp.Add(-early)
	return in.token, nil
}

// The permissions an installation token is asked for: what gitfleet does
// with one — read repositories over git (contents) and look them up in the
// API (metadata: identity resolution, ExplainRefusal) — and nothing that
// could change a repository, whatever the App was granted on the account.
// One token serves every repository of the installation a worker reads
// (one mint an hour per installation, not one per repository), so it is
// not narrowed to a repository: the installation's selection bounds it.
var tokenRequest = &github.InstallationTokenOptions{Permissions: &github.InstallationPermissions{
	Contents: github.String("read"),
	Metadata: github.String("read"),
}}

// askedPermissions is tokenRequest's permissions, for messages.
const askedPermissions = "contents: read, metadata: read"

// mintedToken is GitHub's answer to a mint, its permissions read as a map
// so that one go-github does not know of is seen too.
type mintedToken struct {
	Token       string           `json:"token"`
	ExpiresAt   github.Timestamp `json:"expires_at"`
	Permissions map[string]any   `json:"permissions"`
}

// permissionLevels orders the levels GitHub grants; any other counts as
// more than read.
var permissionLevels = map[string]int{"none": 0, "read": 1, "write": 2, "admin": 3}

// readAsked is tokenRequest's permissions, as tokenBeyond compares them.
var readAsked = map[string]string{"contents": "read", "metadata": "read"}

// tokenBeyond names what a minted token may do beyond what was asked
// ("administration: write, contents: write"), "" when nothing.
func tokenBeyond(asked map[string]string, granted map[string]any) string {
	var beyond []string
	for k, v := range granted {
		level, _ := v.(string)
		got, known := permissionLevels[level]
		if !known || got > permissionLevels[asked[k]] {
			beyond = append(beyond, fmt.Sprintf("%s: %v", k, v))
		}
	}
	slices.Sort(beyond)
	return strings.Join(beyond, ", ")
}

// revoke ends a token gitfleet will not use (DELETE /installation/token,
// authenticated by the token itself).
func (a *App) revoke(ctx context.Context, token string) {
	if token == "" {
		return
	}
	c, err := vcs.NewClient(a.host, token, a.http)
	if err != nil {
		return
	}
	_, _ = c.Apps.RevokeInstallationToken(ctx)
}

// Refused forgets a token the host refused (401: expired early, revoked,
// the installation suspended or removed): the next Token mints another,
// and finds the owner's installation again first — so right after an
// uninstall the next request reads anonymously and its refusal is
// explained ("not installed"), rather than the refused token being used
// again. A host that refuses every token (a proxy answering 401 to
// everything) costs a listing and a mint per refused request: each Git
// request and API lookup renews at most once.
func (a *App) Refused(owner, token string) {
	a.mu.Lock()
	id, ok := a.owners[strings.ToLower(owner)]
	in := a.insts[id]
	a.mu.Unlock()
	if !ok || in == nil {
		return
	}
	in.mu.Lock()
	drop := in.token == token
	if drop {
		in.token = ""
	}
	in.mu.Unlock()
	if drop {
		a.forget(owner)
	}
}

// forget makes the next lookup list the installations again.
func (a *App) forget(string) {
	a.mu.Lock()
	a.listed = time.Time{}
	a.mu.Unlock()
}

// installationOf finds owner's installation in the listing of the App's
// installations, listed again once it is too old to trust.
func (a *App) installationOf(ctx context.Context, owner string) (*installation, error) {
	if in, known := a.cached(owner); known {
		return in, nil
	}
	if a.fresh(owner) {
		return nil, fmt.Errorf("%w on %s", ErrNotInstalled, owner)
	}
	a.listMu.Lock()
	defer a.listMu.Unlock()
	if in, known := a.cached(owner); known || a.fresh(owner) {
		if in == nil {
			return nil, fmt.Errorf("%w on %s", ErrNotInstalled, owner)
		}
		return in, nil
	}
	insts, err := a.list(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.owners = map[string]int64{}
	for _, gi := range insts {
		acc := gi.GetAccount().GetLogin()
		if a.insts[gi.GetID()] == nil {
			a.insts[gi.GetID()] = &installation{id: gi.GetID(), account: acc, gate: newGate(a.slots, a.now)}
		}
		a.owners[strings.ToLower(acc)] = gi.GetID()
		a.insts[gi.GetID()].securityEvents = gi.GetPermissions().GetSecurityEvents()
	}
	a.listed = a.now()
	a.mu.Unlock()
	if in, known := a.cached(owner); known {
		return in, nil
	}
	return nil, fmt.Errorf("%w on %s", ErrNotInstalled, owner)
}

// cached returns owner's installation from a listing young enough to
// trust for an owner found in it.
func (a *App) cached(owner string) (*installation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok := a.owners[strings.ToLower(owner)]
	if !ok || a.listed.IsZero() || a.now().Sub(a.listed) >= ownerTTL {
		return nil, false
	}
	return a.insts[id], true
}

// fresh reports a listing young enough to trust an owner's absence from it.
func (a *App) fresh(string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.listed.IsZero() && a.now().Sub(a.listed) < noOwnerTTL
}

// list reads every page of the App's installations.
func (a *App) list(ctx context.Context) ([]*github.Installation, error) {
	c, err := a.asApp()
	if err != nil {
		return nil, err
	}
	var out []*github.Installation
	opt := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := c.Apps.ListInstallations(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("list the App's installations: %w", err)
		}
		out = append(out, page...)
		if resp.NextPage == 0 || len(out) >= maxListed {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// maxListed bounds a listing of installations (an App on 10,000 accounts).
const maxListed = 10000

// Installations lists the accounts the App is installed on, for finding
// a repository transferred out of the owner's installation by its id.
func (a *App) Installations(ctx context.Context) ([]string, error) {
	insts, err := a.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(insts))
	for _, in := range insts {
		out = append(out, in.GetAccount().GetLogin())
	}
	return out, nil
}

// client is an API client acting as owner's installation, behind the
// installation's rate gate, and the token it sends.
func (a *App) client(ctx context.Context, owner string) (*vcs.GitHub, string, error) {
	in, err := a.installationOf(ctx, owner)
	if err != nil {
		return nil, "", err
	}
	tok, err := a.tokenOf(ctx, in)
	if err != nil {
		return nil, "", err
	}
	h := a.host
	h.Token = tok
	c, err := vcs.NewGitHub(h, a.gatedClient(in, 30*time.Second))
	return c, tok, err
}

// gatedClient is the HTTP client of requests as in's installation: the
// App's transport (tests inject one) behind the installation's rate gate.
func (a *App) gatedClient(in *installation, timeout time.Duration) *http.Client {
	hc := &http.Client{Timeout: timeout}
	if a.http != nil {
		cp := *a.http
		hc = &cp
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = gatedTransport{gate: in.gate, base: base}
	return hc
}
