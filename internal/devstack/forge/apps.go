package forge

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// GitHub Apps: an App authenticates as itself with a JWT signed by its
// private key (RS256, iss = the App's id, at most 10 minutes long), finds
// its installation on an account, and mints installation access tokens
// that act as the installation: they see the public repositories and those
// of the installation's account it was granted (all, or a selection), over
// the API and over git, until they expire. A token has the permissions
// its request asked for (at most the App's; none asked: all the App's)
// and, when the request names repositories, sees only those of them; a
// token without "contents" reads no private repository over git, and one
// without "security_events" (write to upload, read to look) is refused by
// the code scanning endpoints (codescanning.go).

// App is a GitHub App registered on the forge.
type App struct {
	ID   int64
	Slug string
	// Key is the App's private key; KeyPEM is the same key as GitHub lets
	// one download it (PKCS#1 "RSA PRIVATE KEY").
	Key    *rsa.PrivateKey
	KeyPEM []byte
}

// Installation is an App installed on a user or an organization.
type Installation struct {
	ID      int64
	AppID   int64
	Account string
}

type appState struct {
	id   int64
	slug string
	pub  *rsa.PublicKey
	// perms are the permissions the App asks of an account (and each
	// installation accepted): the most a token may be granted.
	perms map[string]string
}

type installState struct {
	id      int64
	app     *appState
	account *ownerState
	// repos is the selection (repository ids); nil grants every repository
	// of the account.
	repos map[int64]bool
	// overGrant is added to every token minted (OverGrant): an API that
	// grants more than it was asked.
	overGrant map[string]string
}

type instToken struct {
	inst    *installState
	expires time.Time
	// perms are what the token may do; repos, when not nil, the only
	// repositories it sees (within the installation's).
	perms map[string]string
	repos map[int64]bool
}

// sees reports whether a token's own narrowing lets it see a repository.
func (t *instToken) sees(v repoView) bool { return t == nil || t.repos == nil || t.repos[v.ID] }

// readsContents reports whether a token may read repositories' contents
// (git): a token narrowed to metadata may not.
func (t *instToken) readsContents() bool {
	return t == nil || levels[t.perms["contents"]] >= levels["read"]
}

// levels orders permission levels.
var levels = map[string]int{"read": 1, "write": 2, "admin": 3}

// DefaultAppPermissions are an App's permissions unless SetAppPermissions
// says otherwise: what gitfleet needs.
func DefaultAppPermissions() map[string]string {
	return map[string]string{"contents": "read", "metadata": "read"}
}

// DefaultTokenLifetime is how long an installation access token lasts, as
// on GitHub.
const DefaultTokenLifetime = time.Hour

func (a *accounts) initApps() {
	a.apps = map[int64]*appState{}
	a.installs = map[int64]*installState{}
	a.instTokens = map[string]*instToken{}
	a.everGrant = map[string]*instToken{}
}

// now is the forge's clock (Options.Now), for JWTs and token expiry.
func (f *Forge) now() time.Time {
	if f.opts.Now != nil {
		return f.opts.Now()
	}
	return time.Now()
}

// CreateApp registers an App with a fresh 2048-bit RSA key.
func (f *Forge) CreateApp(slug string) (App, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return App{}, fmt.Errorf("forge: app key: %w", err)
	}
	return f.AddApp(slug, key)
}

// AddApp registers an App with the given key (for a demo that keeps its
// key across restarts).
func (f *Forge) AddApp(slug string, key *rsa.PrivateKey) (App, error) {
	if err := ValidOwner(slug); err != nil {
		return App{}, err
	}
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	for _, a := range f.acct.apps {
		if strings.EqualFold(a.slug, slug) {
			return App{}, fmt.Errorf("forge: app %s: %w", slug, ErrExists)
		}
	}
	f.acct.nextAppID++
	a := &appState{id: f.acct.nextAppID, slug: slug, pub: &key.PublicKey, perms: DefaultAppPermissions()}
	f.acct.apps[a.id] = a
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return App{ID: a.id, Slug: slug, Key: key, KeyPEM: pemBytes}, nil
}

// InstallApp installs an App on an account (a user or an organization),
// granting it the named repositories of the account, or every one (now and
// later) when none are named.
func (f *Forge) InstallApp(appID int64, account string, repos ...string) (Installation, error) {
	defer f.hookInstalled(appID, account)()
	f.reg.mu.RLock()
	o := f.reg.owners[strings.ToLower(account)]
	f.reg.mu.RUnlock()
	if o == nil {
		return Installation{}, fmt.Errorf("forge: account %s: %w", account, ErrNotFound)
	}
	sel, err := f.selection(account, repos)
	if err != nil {
		return Installation{}, err
	}
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	a := f.acct.apps[appID]
	if a == nil {
		return Installation{}, fmt.Errorf("forge: app %d: %w", appID, ErrNotFound)
	}
	for _, in := range f.acct.installs {
		if in.app == a && in.account == o {
			return Installation{}, fmt.Errorf("forge: app %s on %s: %w", a.slug, account, ErrExists)
		}
	}
	f.acct.nextInstallID++
	in := &installState{id: f.acct.nextInstallID, app: a, account: o, repos: sel}
	f.acct.installs[in.id] = in
	return Installation{ID: in.id, AppID: a.id, Account: o.login}, nil
}

// SetInstallationRepos changes an installation's selection: the named
// repositories of its account, or every one when none are named. Tokens
// already minted see the new selection at once, as on GitHub.
func (f *Forge) SetInstallationRepos(installationID int64, repos ...string) error {
	defer f.hookSelection(installationID)()
	f.acct.mu.RLock()
	in := f.acct.installs[installationID]
	f.acct.mu.RUnlock()
	if in == nil {
		return fmt.Errorf("forge: installation %d: %w", installationID, ErrNotFound)
	}
	sel, err := f.selection(in.account.login, repos)
	if err != nil {
		return err
	}
	f.acct.mu.Lock()
	in.repos = sel
	f.acct.mu.Unlock()
	return nil
}

// Uninstall removes an installation; its tokens stop working.
func (f *Forge) Uninstall(installationID int64) error {
	defer f.hookUninstall(installationID)()
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	if f.acct.installs[installationID] == nil {
		return fmt.Errorf("forge: installation %d: %w", installationID, ErrNotFound)
	}
	delete(f.acct.installs, installationID)
	for t, it := range f.acct.instTokens {
		if it.inst.id == installationID {
			delete(f.acct.instTokens, t)
		}
	}
	return nil
}

// ExpireInstallationTokens makes every installation token minted so far
// expired: the next request with one is answered 401 "Bad credentials".
func (f *Forge) ExpireInstallationTokens() {
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	past := f.now().Add(-time.Second)
	for _, it := range f.acct.instTokens {
		it.expires = past
	}
}

// InstallationTokensMinted counts the installation tokens minted so far.
func (f *Forge) InstallationTokensMinted() int64 { return f.acct.minted.Load() }

// InstallationTokens lists every installation token minted so far, expired
// and revoked ones included, for tests that look for them where they must
// never be.
func (f *Forge) InstallationTokens() []string {
	f.acct.mu.RLock()
	defer f.acct.mu.RUnlock()
	return append([]string(nil), f.acct.everToken...)
}

// SetAppPermissions changes the permissions an App has on every account
// it is installed on (as if each installation accepted them): the most a
// token may be granted ("read", "write" or "admin" by permission name).
func (f *Forge) SetAppPermissions(appID int64, perms map[string]string) error {
	for k, v := range perms {
		if levels[v] == 0 {
			return fmt.Errorf("forge: permission %s: level %q is not read, write or admin", k, v)
		}
	}
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	a := f.acct.apps[appID]
	if a == nil {
		return fmt.Errorf("forge: app %d: %w", appID, ErrNotFound)
	}
	a.perms = maps.Clone(perms)
	return nil
}

// OverGrant makes every token minted for the installation from now on
// carry perms too, whatever its request asked (nil: stop): an API that
// grants more than it was asked, for clients that must refuse such a
// token.
func (f *Forge) OverGrant(installationID int64, perms map[string]string) error {
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	in := f.acct.installs[installationID]
	if in == nil {
		return fmt.Errorf("forge: installation %d: %w", installationID, ErrNotFound)
	}
	in.overGrant = maps.Clone(perms)
	return nil
}

// TokenGrant is what an installation token was granted.
type TokenGrant struct {
	Permissions map[string]string
	// Repositories are the names of the repositories a token was narrowed
	// to, nil for the installation's.
	Repositories []string
	Revoked      bool
}

// InstallationTokenGrant reports what a token minted so far was granted
// (false for a token the forge never minted).
func (f *Forge) InstallationTokenGrant(token string) (TokenGrant, bool) {
	f.acct.mu.RLock()
	it := f.acct.everGrant[token]
	f.acct.mu.RUnlock()
	if it == nil {
		return TokenGrant{}, false
	}
	g := TokenGrant{Permissions: maps.Clone(it.perms)}
	for id := range it.repos {
		if r, ok := f.LookupID(id); ok {
			g.Repositories = append(g.Repositories, r.FullName())
		}
	}
	sort.Strings(g.Repositories)
	f.acct.mu.RLock()
	g.Revoked = f.acct.instTokens[token] == nil
	f.acct.mu.RUnlock()
	return g, true
}

// selection resolves repository names of account to ids (nil for none).
func (f *Forge) selection(account string, repos []string) (map[int64]bool, error) {
	if len(repos) == 0 {
		return nil, nil
	}
	sel := map[int64]bool{}
	for _, n := range repos {
		r, ok := f.Lookup(account, n)
		if !ok || !strings.EqualFold(r.Owner, account) {
			return nil, fmt.Errorf("forge: %s/%s: %w", account, n, ErrNotFound)
		}
		sel[r.ID] = true
	}
	return sel, nil
}

// grants reports whether an installation sees a private repository.
func (in *installState) grants(v repoView) bool {
	if !strings.EqualFold(in.account.login, v.Owner) {
		return false
	}
	return in.repos == nil || in.repos[v.ID]
}

// looksLikeJWT tells a JWT (three base64url parts) from a token.
func looksLikeJWT(cred string) bool { return strings.Count(cred, ".") == 2 }

// checkJWT verifies an App's JWT as GitHub does: RS256 by the App's key,
// iss its id, iat not in the future (60 s of skew), exp in the future and
// at most 10 minutes after iat. The message is GitHub's for the failure.
func (f *Forge) checkJWT(tok string) (*appState, string) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, "A JSON web token could not be decoded"
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat int64           `json:"iat"`
		Exp int64           `json:"exp"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &hdr) != nil || json.Unmarshal(cb, &claims) != nil {
		return nil, "A JSON web token could not be decoded"
	}
	if hdr.Alg != "RS256" {
		return nil, "A JSON web token could not be decoded"
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	id, err := strconv.ParseInt(iss, 10, 64)
	if err != nil {
		return nil, "'Issuer' claim ('iss') must be an Integer"
	}
	f.acct.mu.RLock()
	a := f.acct.apps[id]
	f.acct.mu.RUnlock()
	if a == nil {
		return nil, "Integration not found"
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(a.pub, crypto.SHA256, sum[:], sig) != nil {
		return nil, "A JSON web token could not be decoded"
	}
	now := f.now().Unix()
	switch {
	case claims.Iat > now+60:
		return nil, "'Issued at' claim ('iat') must be an Integer representing a time in the past"
	case claims.Exp <= now || claims.Exp-claims.Iat > 600:
		return nil, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	}
	return a, ""
}

// installationToken returns a live installation token (nil for an
// unknown, revoked or expired one).
func (f *Forge) installationToken(tok string) *instToken {
	f.acct.mu.RLock()
	defer f.acct.mu.RUnlock()
	it := f.acct.instTokens[tok]
	if it == nil || !f.now().Before(it.expires) {
		return nil
	}
	return it
}

func newInstallationToken() string { return "ghs_" + newToken()[4:] }

// The App endpoints.

type installationJSON struct {
	ID                  int64             `json:"id"`
	AppID               int64             `json:"app_id"`
	AppSlug             string            `json:"app_slug"`
	TargetID            int64             `json:"target_id"`
	TargetType          string            `json:"target_type"`
	Account             userJSON          `json:"account"`
	RepositorySelection string            `json:"repository_selection"`
	AccessTokensURL     string            `json:"access_tokens_url"`
	RepositoriesURL     string            `json:"repositories_url"`
	Permissions         map[string]string `json:"permissions"`
	CreatedAt           string            `json:"created_at"`
	UpdatedAt           string            `json:"updated_at"`
}

// installationToJSON takes the accounts' lock: call it without.
func installationToJSON(c *apiCall, in *installState) installationJSON {
	c.f.acct.mu.RLock()
	sel := "all"
	if in.repos != nil {
		sel = "selected"
	}
	perms := maps.Clone(in.app.perms)
	c.f.acct.mu.RUnlock()
	t := ghTime(time.Unix(0, 0))
	return installationJSON{
		ID: in.id, AppID: in.app.id, AppSlug: in.app.slug, TargetID: in.account.id, TargetType: in.account.typ,
		Account:             ownerJSON(c, in.account.login, in.account.id, in.account.typ),
		RepositorySelection: sel,
		AccessTokensURL:     c.apiBase() + "app/installations/" + strconv.FormatInt(in.id, 10) + "/access_tokens",
		RepositoriesURL:     c.apiBase() + "installation/repositories",
		Permissions:         perms, CreatedAt: t, UpdatedAt: t,
	}
}

const docApps = "https://docs.github.com/rest/apps/apps"

// asApp answers 401 unless the request is authenticated as an App.
func (c *apiCall) asApp() (*appState, bool) {
	if c.who.app == nil {
		c.error(http.StatusUnauthorized, "A JSON web token could not be decoded", docApps)
		return nil, false
	}
	return c.who.app, true
}

// GET /app
func getApp(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	c.f.acct.mu.RLock()
	perms := maps.Clone(a.perms)
	c.f.acct.mu.RUnlock()
	c.json(http.StatusOK, map[string]any{"id": a.id, "slug": a.slug, "name": a.slug, "permissions": perms})
}

// GET /app/installations
func getAppInstallations(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	c.f.acct.mu.RLock()
	var ins []*installState
	for _, in := range c.f.acct.installs {
		if in.app == a {
			ins = append(ins, in)
		}
	}
	c.f.acct.mu.RUnlock()
	sort.Slice(ins, func(i, j int) bool { return ins[i].id < ins[j].id })
	items := make([]any, len(ins))
	for i, in := range ins {
		items[i] = installationToJSON(c, in)
	}
	c.paged(items, time.Time{})
}

// installationOf finds the App's installation on an account.
func (c *apiCall) installationOf(a *appState, account string) *installState {
	c.f.acct.mu.RLock()
	defer c.f.acct.mu.RUnlock()
	for _, in := range c.f.acct.installs {
		if in.app == a && strings.EqualFold(in.account.login, account) {
			return in
		}
	}
	return nil
}

// GET /orgs/{org}/installation and GET /users/{user}/installation
func getAccountInstallation(kind string) func(*apiCall) {
	return func(c *apiCall) {
		a, ok := c.asApp()
		if !ok {
			return
		}
		login := c.param("account")
		c.f.reg.mu.RLock()
		o := c.f.reg.owners[strings.ToLower(login)]
		c.f.reg.mu.RUnlock()
		in := c.installationOf(a, login)
		if o == nil || in == nil || (kind == "Organization" && o.typ != "Organization") {
			c.notFound(docApps)
			return
		}
		c.json(http.StatusOK, installationToJSON(c, in))
	}
}

// GET /repos/{owner}/{repo}/installation: the installation that grants the
// repository (an old name answers for the repository it leads to).
func getRepoInstallation(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	v, _, found := c.f.reg.resolve(c.param("owner"), c.param("repo"))
	if !found {
		c.notFound(docApps)
		return
	}
	in := c.installationOf(a, v.Owner)
	if in == nil || !in.grants(v) {
		c.notFound(docApps)
		return
	}
	c.json(http.StatusOK, installationToJSON(c, in))
}

// tokenRequest is the body of POST .../access_tokens (all optional).
type tokenRequest struct {
	Repositories  []string          `json:"repositories"`
	RepositoryIDs []int64           `json:"repository_ids"`
	Permissions   map[string]string `json:"permissions"`
}

// POST /app/installations/{id}/access_tokens: a token with the permissions
// asked (each at most the App's: 422 otherwise; none asked, all the
// App's), seeing the repositories asked (each one the installation grants:
// 422 otherwise; none asked, the installation's), as on GitHub.
func postAccessToken(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	var req tokenRequest
	if body, _ := io.ReadAll(io.LimitReader(c.r.Body, 1<<20)); len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			c.error(http.StatusBadRequest, "Problems parsing JSON", docApps)
			return
		}
	}
	id, _ := strconv.ParseInt(c.param("id"), 10, 64)
	c.f.acct.mu.RLock()
	in := c.f.acct.installs[id]
	c.f.acct.mu.RUnlock()
	if in == nil || in.app != a {
		c.notFound(docApps)
		return
	}
	// The repositories asked, resolved before the accounts' lock is taken
	// (the registry has its own).
	var asked []repoView
	for _, n := range req.Repositories {
		v, _, found := c.f.reg.resolve(in.account.login, n)
		if !found {
			c.error(http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.", docApps)
			return
		}
		asked = append(asked, v)
	}
	for _, rid := range req.RepositoryIDs {
		v, found := c.f.reg.byID(rid)
		if !found {
			c.error(http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.", docApps)
			return
		}
		asked = append(asked, v)
	}
	c.f.acct.mu.Lock()
	if c.f.acct.installs[id] != in {
		c.f.acct.mu.Unlock()
		c.notFound(docApps)
		return
	}
	it := &instToken{inst: in, perms: maps.Clone(a.perms)}
	if req.Permissions != nil {
		it.perms = map[string]string{}
		for k, v := range req.Permissions {
			if levels[v] == 0 || levels[v] > levels[a.perms[k]] {
				c.f.acct.mu.Unlock()
				c.error(http.StatusUnprocessableEntity, "The permissions requested are not granted to this installation.", docApps)
				return
			}
			it.perms[k] = v
		}
	}
	for k, v := range in.overGrant {
		if levels[v] > levels[it.perms[k]] {
			it.perms[k] = v
		}
	}
	if len(asked) > 0 {
		it.repos = map[int64]bool{}
		for _, v := range asked {
			if !in.grants(v) {
				c.f.acct.mu.Unlock()
				c.error(http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.", docApps)
				return
			}
			it.repos[v.ID] = true
		}
	}
	life := c.f.opts.TokenLifetime
	if life <= 0 {
		life = DefaultTokenLifetime
	}
	tok := newInstallationToken()
	it.expires = c.f.now().Add(life).UTC().Truncate(time.Second)
	c.f.acct.instTokens[tok] = it
	c.f.acct.everGrant[tok] = it
	c.f.acct.everToken = append(c.f.acct.everToken, tok)
	sel := "all"
	if in.repos != nil || it.repos != nil {
		sel = "selected"
	}
	perms := maps.Clone(it.perms)
	c.f.acct.mu.Unlock()
	c.f.acct.minted.Add(1)
	c.json(http.StatusCreated, map[string]any{"token": tok, "expires_at": ghTime(it.expires),
		"permissions": perms, "repository_selection": sel})
}

// DELETE /installation/token: revokes the token the request carries.
func deleteInstallationToken(c *apiCall) {
	if c.who.inst == nil {
		c.error(http.StatusUnauthorized, "Bad credentials", docApps)
		return
	}
	tok := credential(c.r)
	c.f.acct.mu.Lock()
	delete(c.f.acct.instTokens, tok)
	c.f.acct.mu.Unlock()
	c.w.WriteHeader(http.StatusNoContent)
}

// GET /installation/repositories: what an installation token sees of its
// account.
func getInstallationRepos(c *apiCall) {
	if c.who.inst == nil {
		c.error(http.StatusForbidden, "This endpoint requires you to be authenticated as an installation", docApps)
		return
	}
	in := c.who.inst
	vs := c.f.views(c.who, func(v repoView) bool { return in.grants(v) && c.who.tok.sees(v) })
	items := make([]any, len(vs))
	sort.Slice(vs, func(i, j int) bool { return vs[i].ID < vs[j].ID })
	for i, v := range vs {
		items[i] = repoToJSON(c, v)
	}
	c.json(http.StatusOK, map[string]any{"total_count": len(items), "repositories": items})
}
