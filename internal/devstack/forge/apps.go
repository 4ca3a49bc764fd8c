package forge

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
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
// the API and over git, until they expire.

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
}

type installState struct {
	id      int64
	app     *appState
	account *ownerState
	// repos is the selection (repository ids); nil grants every repository
	// of the account.
	repos map[int64]bool
}

type instToken struct {
	inst    *installState
	expires time.Time
}

// DefaultTokenLifetime is how long an installation access token lasts, as
// on GitHub.
const DefaultTokenLifetime = time.Hour

func (a *accounts) initApps() {
	a.apps = map[int64]*appState{}
	a.installs = map[int64]*installState{}
	a.instTokens = map[string]*instToken{}
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
	a := &appState{id: f.acct.nextAppID, slug: slug, pub: &key.PublicKey}
	f.acct.apps[a.id] = a
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return App{ID: a.id, Slug: slug, Key: key, KeyPEM: pemBytes}, nil
}

// InstallApp installs an App on an account (a user or an organization),
// granting it the named repositories of the account, or every one (now and
// later) when none are named.
func (f *Forge) InstallApp(appID int64, account string, repos ...string) (Installation, error) {
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

// installationByToken returns the installation a live token acts as; a
// known but expired token is reported as such.
func (f *Forge) installationByToken(tok string) (in *installState, expired bool) {
	f.acct.mu.RLock()
	defer f.acct.mu.RUnlock()
	it := f.acct.instTokens[tok]
	if it == nil {
		return nil, false
	}
	if !f.now().Before(it.expires) {
		return nil, true
	}
	return it.inst, false
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

var appPermissions = map[string]string{"contents": "read", "metadata": "read"}

func installationToJSON(c *apiCall, in *installState) installationJSON {
	sel := "all"
	if in.repos != nil {
		sel = "selected"
	}
	t := ghTime(time.Unix(0, 0))
	return installationJSON{
		ID: in.id, AppID: in.app.id, AppSlug: in.app.slug, TargetID: in.account.id, TargetType: in.account.typ,
		Account:             ownerJSON(c, in.account.login, in.account.id, in.account.typ),
		RepositorySelection: sel,
		AccessTokensURL:     c.apiBase() + "app/installations/" + strconv.FormatInt(in.id, 10) + "/access_tokens",
		RepositoriesURL:     c.apiBase() + "installation/repositories",
		Permissions:         appPermissions, CreatedAt: t, UpdatedAt: t,
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
	c.json(http.StatusOK, map[string]any{"id": a.id, "slug": a.slug, "name": a.slug, "permissions": appPermissions})
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

// POST /app/installations/{id}/access_tokens
func postAccessToken(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(c.param("id"), 10, 64)
	c.f.acct.mu.Lock()
	in := c.f.acct.installs[id]
	if in == nil || in.app != a {
		c.f.acct.mu.Unlock()
		c.notFound(docApps)
		return
	}
	life := c.f.opts.TokenLifetime
	if life <= 0 {
		life = DefaultTokenLifetime
	}
	tok := newInstallationToken()
	exp := c.f.now().Add(life).UTC().Truncate(time.Second)
	c.f.acct.instTokens[tok] = &instToken{inst: in, expires: exp}
	c.f.acct.everToken = append(c.f.acct.everToken, tok)
	sel := "all"
	if in.repos != nil {
		sel = "selected"
	}
	c.f.acct.mu.Unlock()
	c.f.acct.minted.Add(1)
	c.json(http.StatusCreated, map[string]any{"token": tok, "expires_at": ghTime(exp),
		"permissions": appPermissions, "repository_selection": sel})
}

// GET /installation/repositories: what an installation token sees of its
// account.
func getInstallationRepos(c *apiCall) {
	if c.who.inst == nil {
		c.error(http.StatusForbidden, "This endpoint requires you to be authenticated as an installation", docApps)
		return
	}
	in := c.who.inst
	vs := c.f.views(c.who, func(v repoView) bool { return in.grants(v) })
	items := make([]any, len(vs))
	sort.Slice(vs, func(i, j int) bool { return vs[i].ID < vs[j].ID })
	for i, v := range vs {
		items[i] = repoToJSON(c, v)
	}
	c.json(http.StatusOK, map[string]any{"total_count": len(items), "repositories": items})
}
