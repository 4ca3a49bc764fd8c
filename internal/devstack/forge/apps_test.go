package forge

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// signJWT is an App's JWT as GitHub documents it (RS256; iss, iat, exp).
func signJWT(t *testing.T, key *rsa.PrivateKey, iss any, iat, exp time.Time) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	in := enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(map[string]any{"iss": iss, "iat": iat.Unix(), "exp": exp.Unix()})
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// apiDo sends one API request with an Authorization header and decodes
// the JSON answer.
func apiDo(t *testing.T, f *Forge, method, path, auth string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.APIURL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// An App installed on an organization with a selection of its repositories
// and on a user with all of theirs: JWTs are checked as GitHub checks them,
// installations are found by account and by repository, and installation
// tokens see exactly what was granted, over the API and over git, until
// they expire or the grant changes.
func TestGitHubApp(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	f := newForge(t, func(o *Options) { o.Now = clock.Now; o.TokenLifetime = 10 * time.Minute })
	if err := f.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"acme", "api"}, {"acme", "vault"}, {"acme", "site"}, {"carol", "dots"}} {
		seeded(t, f, r[0], r[1])
	}
	if _, err := f.AddUser("carol"); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"acme", "api"}, {"acme", "vault"}, {"carol", "dots"}} {
		if err := f.SetPrivate(r[0], r[1], true); err != nil {
			t.Fatal(err)
		}
	}
	app, err := f.CreateApp("gitfleet")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := f.CreateApp("other")
	orgInst, err := f.InstallApp(app.ID, "acme", "api")
	if err != nil {
		t.Fatal(err)
	}
	userInst, err := f.InstallApp(app.ID, "carol")
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	jwt := "Bearer " + signJWT(t, app.Key, app.ID, now.Add(-time.Minute), now.Add(9*time.Minute))

	// JWTs.
	for name, tc := range map[string]struct {
		auth string
		want int
		msg  string
	}{
		"valid":         {jwt, 200, ""},
		"iss as string": {"Bearer " + signJWT(t, app.Key, "1", now, now.Add(5*time.Minute)), 200, ""},
		"other key":     {"Bearer " + signJWT(t, other.Key, app.ID, now, now.Add(5*time.Minute)), 401, "A JSON web token could not be decoded"},
		"expired":       {"Bearer " + signJWT(t, app.Key, app.ID, now.Add(-20*time.Minute), now.Add(-11*time.Minute)), 401, "'Expiration time'"},
		"too long":      {"Bearer " + signJWT(t, app.Key, app.ID, now, now.Add(time.Hour)), 401, "'Expiration time'"},
		"issued later":  {"Bearer " + signJWT(t, app.Key, app.ID, now.Add(5*time.Minute), now.Add(9*time.Minute)), 401, "'Issued at'"},
		"unknown app":   {"Bearer " + signJWT(t, app.Key, 99, now, now.Add(5*time.Minute)), 401, "Integration not found"},
		"no JWT":        {"", 401, "JSON web token"},
	} {
		code, body := apiDo(t, f, "GET", "app", tc.auth)
		msg, _ := body["message"].(string)
		if code != tc.want || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: GET /app = %d %v, want %d %q", name, code, body, tc.want, tc.msg)
		}
	}

	// Installations by account and by repository.
	for _, tc := range []struct {
		path string
		want int64 // 0: 404
	}{
		{"orgs/acme/installation", orgInst.ID},
		{"users/carol/installation", userInst.ID},
		{"users/acme/installation", orgInst.ID}, // an organization is a user too
		{"orgs/carol/installation", 0},
		{"orgs/nobody/installation", 0},
		{"repos/acme/api/installation", orgInst.ID},
		{"repos/acme/vault/installation", 0}, // not in the selection
		{"repos/carol/dots/installation", userInst.ID},
	} {
		code, body := apiDo(t, f, "GET", tc.path, jwt)
		switch {
		case tc.want == 0 && code != 404, tc.want != 0 && (code != 200 || int64(body["id"].(float64)) != tc.want):
			t.Errorf("GET %s = %d %v, want installation %d", tc.path, code, body, tc.want)
		}
	}
	if code, body := apiDo(t, f, "GET", "orgs/acme/installation", jwt); body["repository_selection"] != "selected" {
		t.Errorf("org installation: %d %v, want repository_selection selected", code, body)
	}

	// Tokens.
	mint := func(inst int64) (string, time.Time) {
		t.Helper()
		code, body := apiDo(t, f, "POST", "app/installations/"+itoa(inst)+"/access_tokens", jwt)
		if code != 201 {
			t.Fatalf("mint: %d %v", code, body)
		}
		exp, err := time.Parse(time.RFC3339, body["expires_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return body["token"].(string), exp
	}
	if code, _ := apiDo(t, f, "POST", "app/installations/"+itoa(orgInst.ID)+"/access_tokens", "token "+testToken); code != 401 {
		t.Errorf("minting with a token instead of a JWT: %d, want 401", code)
	}
	tok, exp := mint(orgInst.ID)
	if !strings.HasPrefix(tok, "ghs_") || exp.Sub(clock.Now()) > 10*time.Minute || exp.Sub(clock.Now()) < 9*time.Minute {
		t.Errorf("token %q expires %v, want ghs_… in 10 minutes", tok[:4], exp)
	}
	for _, tc := range []struct {
		repo string
		want int
	}{{"acme/api", 200}, {"acme/vault", 404}, {"acme/site", 200}, {"carol/dots", 404}} {
		if code, _ := apiDo(t, f, "GET", "repos/"+tc.repo, "token "+tok); code != tc.want {
			t.Errorf("installation token: GET repos/%s = %d, want %d", tc.repo, code, tc.want)
		}
	}
	if code, body := apiDo(t, f, "GET", "user", "token "+tok); code != 403 {
		t.Errorf("GET /user with an installation token = %d %v, want 403", code, body)
	}
	auth := &githttp.BasicAuth{Username: "x-access-token", Password: tok}
	if _, err := cloneMem(f.CloneURL("acme", "api"), auth); err != nil {
		t.Errorf("git clone with the installation token: %v", err)
	}
	if _, err := cloneMem(f.CloneURL("acme", "api"), nil); err == nil || !strings.Contains(err.Error(), "authentication required") {
		t.Errorf("anonymous clone of a private repository: %v, want authentication required (401)", err)
	}
	if _, err := cloneMem(f.CloneURL("acme", "vault"), auth); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("clone outside the selection: %v, want not found (404)", err)
	}

	// The grant changes under a live token.
	if err := f.SetInstallationRepos(orgInst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cloneMem(f.CloneURL("acme", "vault"), auth); err != nil {
		t.Errorf("clone once every repository is granted: %v", err)
	}
	if err := f.SetInstallationRepos(orgInst.ID, "vault"); err != nil {
		t.Fatal(err)
	}
	if _, err := cloneMem(f.CloneURL("acme", "api"), auth); err == nil {
		t.Errorf("clone of a repository taken out of the selection succeeded")
	}

	// Expiry.
	clock.Add(10 * time.Minute)
	if code, body := apiDo(t, f, "GET", "repos/acme/site", "token "+tok); code != 401 || body["message"] != "Bad credentials" {
		t.Errorf("expired token: %d %v, want 401 Bad credentials", code, body)
	}
	if _, err := cloneMem(f.CloneURL("acme", "vault"), auth); err == nil || !strings.Contains(err.Error(), "authentication") {
		t.Errorf("git with an expired token: %v, want 401", err)
	}
	now = clock.Now()
	jwt = "Bearer " + signJWT(t, app.Key, app.ID, now, now.Add(5*time.Minute))
	tok2, _ := mint(orgInst.ID)
	if _, err := cloneMem(f.CloneURL("acme", "vault"), &githttp.BasicAuth{Username: "x-access-token", Password: tok2}); err != nil {
		t.Errorf("clone with a renewed token: %v", err)
	}
	f.ExpireInstallationTokens()
	if code, _ := apiDo(t, f, "GET", "repos/acme/vault", "token "+tok2); code != 401 {
		t.Errorf("token after ExpireInstallationTokens: %d, want 401", code)
	}

	// Uninstalled.
	tok3, _ := mint(userInst.ID)
	if err := f.Uninstall(userInst.ID); err != nil {
		t.Fatal(err)
	}
	if code, _ := apiDo(t, f, "GET", "users/carol/installation", jwt); code != 404 {
		t.Errorf("installation after Uninstall: %d, want 404", code)
	}
	if code, _ := apiDo(t, f, "GET", "repos/carol/dots", "token "+tok3); code != 401 {
		t.Errorf("token of a removed installation: %d, want 401", code)
	}
	if got := f.InstallationTokensMinted(); got != 3 {
		t.Errorf("InstallationTokensMinted = %d, want 3", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A token request is honoured as on GitHub: the permissions it asks for
// (each at most the App's; 422 beyond) and the repositories it names
// (each one the installation grants; 422 otherwise) are what the token
// gets; a token without contents reads no private repository over git;
// OverGrant adds to every token what was not asked; DELETE
// /installation/token revokes the token it carries.
func TestInstallationTokenRequest(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	f := newForge(t, func(o *Options) { o.Now = clock.Now })
	if err := f.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"api", "vault"} {
		seeded(t, f, "acme", n)
		if err := f.SetPrivate("acme", n, true); err != nil {
			t.Fatal(err)
		}
	}
	app, err := f.CreateApp("gitfleet")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetAppPermissions(app.ID, map[string]string{"contents": "write", "metadata": "read", "administration": "write"}); err != nil {
		t.Fatal(err)
	}
	inst, err := f.InstallApp(app.ID, "acme")
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	jwt := "Bearer " + signJWT(t, app.Key, app.ID, now.Add(-time.Minute), now.Add(9*time.Minute))
	mint := func(body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest("POST", f.APIURL()+"app/installations/"+itoa(inst.ID)+"/access_tokens", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", jwt)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		name, body string
		code       int
		perms      map[string]string
		repos      []string
		clones     map[string]bool // repository → clone works
	}{
		{"no body: all the App's", "", 201, map[string]string{"contents": "write", "metadata": "read", "administration": "write"}, nil,
			map[string]bool{"api": true, "vault": true}},
		{"read only", `{"permissions":{"contents":"read","metadata":"read"}}`, 201, map[string]string{"contents": "read", "metadata": "read"}, nil,
			map[string]bool{"api": true, "vault": true}},
		{"metadata only", `{"permissions":{"metadata":"read"}}`, 201, map[string]string{"metadata": "read"}, nil,
			map[string]bool{"api": false, "vault": false}},
		{"one repository by name", `{"repositories":["api"],"permissions":{"contents":"read"}}`, 201, map[string]string{"contents": "read"}, []string{"acme/api"},
			map[string]bool{"api": true, "vault": false}},
		{"more than the App has", `{"permissions":{"contents":"admin"}}`, 422, nil, nil, nil},
		{"a permission the App lacks", `{"permissions":{"issues":"read"}}`, 422, nil, nil, nil},
		{"a repository it does not have", `{"repositories":["nope"]}`, 422, nil, nil, nil},
		{"not JSON", `{`, 400, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := mint(tc.body)
			if code != tc.code {
				t.Fatalf("mint = %d %v, want %d", code, body, tc.code)
			}
			if code != 201 {
				return
			}
			tok := body["token"].(string)
			g, ok := f.InstallationTokenGrant(tok)
			if !ok || !maps.Equal(g.Permissions, tc.perms) || !slices.Equal(g.Repositories, tc.repos) {
				t.Errorf("grant = %+v, want %v on %v", g, tc.perms, tc.repos)
			}
			if got := body["permissions"].(map[string]any); len(got) != len(tc.perms) {
				t.Errorf("answered permissions %v, want %v", got, tc.perms)
			}
			for repo, works := range tc.clones {
				_, err := cloneMem(f.CloneURL("acme", repo), &githttp.BasicAuth{Username: "x-access-token", Password: tok})
				if (err == nil) != works {
					t.Errorf("clone acme/%s: %v, want works %t", repo, err, works)
				}
			}
		})
	}

	// An API that grants more than asked.
	if err := f.OverGrant(inst.ID, map[string]string{"contents": "write", "administration": "write"}); err != nil {
		t.Fatal(err)
	}
	code, body := mint(`{"permissions":{"contents":"read","metadata":"read"}}`)
	g, _ := f.InstallationTokenGrant(body["token"].(string))
	want := map[string]string{"contents": "write", "metadata": "read", "administration": "write"}
	if code != 201 || !maps.Equal(g.Permissions, want) {
		t.Errorf("over-granted mint = %d, %v, want %v", code, g.Permissions, want)
	}

	// Revocation.
	tok := body["token"].(string)
	if code, _ := apiDo(t, f, "DELETE", "installation/token", "token "+tok); code != 204 {
		t.Errorf("DELETE /installation/token = %d, want 204", code)
	}
	if g, _ := f.InstallationTokenGrant(tok); !g.Revoked {
		t.Error("the token is not revoked")
	}
	if code, _ := apiDo(t, f, "GET", "repos/acme/api", "token "+tok); code != 401 {
		t.Errorf("a revoked token: GET repos/acme/api = %d, want 401", code)
	}
}
