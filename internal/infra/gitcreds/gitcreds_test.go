package gitcreds

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/reach"
	"gitfleet/internal/infra/vcs"
)

func TestMain(m *testing.M) {
	// The forge listens on loopback, listed as `starter dev` lists it.
	h, err := reach.ParseHosts([]string{"127.0.0.1", "::1", "localhost"})
	if err != nil {
		panic(err)
	}
	reach.SetHosts(h)
	os.Exit(m.Run())
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// stack is a forge with an organization acme, its private repository
// acme/vault and public acme/site, and a GitHub App installed on acme
// (every repository) whose key is in a file, all on one clock.
type stack struct {
	f     *forge.Forge
	clock *clock
	app   forge.App
	inst  forge.Installation
	host  vcs.Host
	hosts vcs.Hosts
	key   string // the key file
}

func newStack(t *testing.T) *stack {
	t.Helper()
	c := &clock{t: time.Now()}
	f, err := forge.Start(forge.Options{Dir: t.TempDir(), Now: c.Now, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"vault", "site"} {
		if _, err := f.CreateRepo("acme", n); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Commit("acme", n, "main", map[string]string{"README.md": n}, "initial"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SetPrivate("acme", "vault", true); err != nil {
		t.Fatal(err)
	}
	app, err := f.CreateApp("gitfleet")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := f.InstallApp(app.ID, "acme")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(key, app.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	hosts, err := vcs.HostsFromEnv(func(k string) string {
		return map[string]string{vcs.EnvAPIURL: f.APIURL(), vcs.EnvAppID: itoa(app.ID), vcs.EnvAppKeyFile: key}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := hosts.Lookup(hosts.Default())
	return &stack{f: f, clock: c, app: app, inst: inst, host: h, hosts: hosts, key: key}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// rateLimited is GitHub's primary rate-limit answer, resetting at reset.
func rateLimited(reset time.Time) *http.Response {
	h := http.Header{}
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	return &http.Response{StatusCode: http.StatusForbidden, Header: h}
}

func (s *stack) set(t *testing.T) *Set {
	t.Helper()
	set, err := FromHosts(s.hosts, AppOptions{Now: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// Installation tokens are minted once and reused, renewed before they
// expire on the injected clock, minted again when the host refuses one,
// and an owner without an installation is said so.
func TestAppTokens(t *testing.T) {
	s := newStack(t)
	set := s.set(t)
	app := set.Source(s.host.Name)
	ctx := context.Background()

	tok, err := app.Token(ctx, "acme")
	if err != nil || !strings.HasPrefix(tok, "ghs_") {
		t.Fatalf("Token = %q, %v", tok, err)
	}
	for _, step := range []struct {
		advance time.Duration
		same    bool
		minted  int64
	}{
		{0, true, 1},
		{54 * time.Minute, true, 1},  // 6 minutes left: still good
		{2 * time.Minute, false, 2},  // 4 minutes left: renewed
		{30 * time.Minute, true, 2},  // the renewed one lasts its hour
		{30 * time.Minute, false, 3}, // past it
	} {
		s.clock.Add(step.advance)
		got, err := app.Token(ctx, "ACME")
		if err != nil {
			t.Fatal(err)
		}
		if (got == tok) != step.same || s.f.InstallationTokensMinted() != step.minted {
			t.Errorf("after %v more: same token %v (want %v), %d minted (want %d)", step.advance, got == tok, step.same,
				s.f.InstallationTokensMinted(), step.minted)
		}
		tok = got
	}
	app.Refused("acme", tok)
	if again, _ := app.Token(ctx, "acme"); again == tok || s.f.InstallationTokensMinted() != 4 {
		t.Errorf("after Refused: same token %v, %d minted; want a new one", again == tok, s.f.InstallationTokensMinted())
	}
	// A token refused as soon as it is minted is dropped too: it may be
	// the last of an installation removed since (below), which must not
	// answer the lookup that explains the refusal.
	fresh, _ := app.Token(ctx, "acme")
	app.Refused("acme", fresh)
	if again, _ := app.Token(ctx, "acme"); again == fresh || s.f.InstallationTokensMinted() != 5 {
		t.Errorf("a fresh token refused: kept %v, %d minted; want a new one", again == fresh, s.f.InstallationTokensMinted())
	}

	_, err = app.Token(ctx, "nobody")
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "the App is not installed on nobody") {
		t.Errorf("Token(nobody) = %v, want \"the App is not installed on nobody\"", err)
	}
	// An App installed since the listing is seen once the absence is no
	// longer trusted; one removed is found out when a token is minted.
	if err := s.f.CreateOrg("late"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Token(ctx, "late"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Token(late) before installing: %v", err)
	}
	late, err := s.f.InstallApp(s.app.ID, "late")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Token(ctx, "late"); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Token(late) within noOwnerTTL of the listing: %v, want the listing's answer", err)
	}
	s.clock.Add(noOwnerTTL)
	if _, err := app.Token(ctx, "late"); err != nil {
		t.Errorf("Token(late) once the listing is old: %v", err)
	}
	if err := s.f.Uninstall(late.ID); err != nil {
		t.Fatal(err)
	}
	s.clock.Add(time.Hour) // the token is due for renewal
	if _, err := app.Token(ctx, "late"); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Token(late) after Uninstall: %v, want ErrNotInstalled", err)
	}
	if tok, err := set.GitToken(ctx, s.host.CloneURL("nobody", "x")); tok != "" || err != nil {
		t.Errorf("GitToken for an owner without installation = %q, %v; want anonymous", tok, err)
	}
	if tok, err := set.GitToken(ctx, "https://elsewhere.example/acme/vault.git"); tok != "" || err != nil {
		t.Errorf("GitToken for another host = %q, %v; want none", tok, err)
	}
}

// Mirrors fetch private repositories with the installation token, renew
// it when the host refuses an expired one mid-way, and leave it nowhere on
// disk; without credentials the same fetch is refused.
func TestMirrorWithApp(t *testing.T) {
	s := newStack(t)
	set := s.set(t)
	ctx := context.Background()
	url := s.host.CloneURL("acme", "vault")

	anon, err := mirror.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Sync(ctx, url); errclass.Classify(err).Reason != errclass.ReasonPermissionDenied {
		t.Fatalf("anonymous sync of a private repository: %v, want permission denied", err)
	}

	root := t.TempDir()
	m, err := mirror.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetCredentials(set)
	r, err := m.Sync(ctx, url)
	if err != nil || r.Head == "" {
		t.Fatalf("sync with the App: %+v, %v", r, err)
	}
	// The forge ends the token early: the next requests are refused, the
	// token is dropped and another minted, and the sync goes through.
	sha, err := s.f.Commit("acme", "vault", "main", map[string]string{"b": "b"}, "second")
	if err != nil {
		t.Fatal(err)
	}
	s.f.ExpireInstallationTokens()
	if r, err = m.Sync(ctx, url); err != nil || r.Head != sha {
		t.Fatalf("sync after the token expired: %+v, %v (want head %s)", r, err, sha)
	}
	if n := s.f.InstallationTokensMinted(); n != 2 {
		t.Errorf("%d tokens minted, want 2", n)
	}
	s.f.ExpireInstallationTokens()
	if ok, err := m.HasCommit(ctx, url, sha); !ok || err != nil {
		t.Errorf("HasCommit with an expired token: %v, %v", ok, err)
	}
	s.f.ExpireInstallationTokens()
	if refs, err := mirror.ListRefsWith(ctx, url, set); err != nil || len(refs) == 0 {
		t.Errorf("ListRefsWith: %d refs, %v", len(refs), err)
	}
	if _, err := mirror.ListRefs(ctx, url); err == nil {
		t.Errorf("anonymous ListRefs of a private repository succeeded")
	}

	// A runner's build fetches one commit of the private repository.
	s.f.ExpireInstallationTokens()
	if _, ok, err := mirror.FetchSnapshotWith(ctx, url, sha, filepath.Join(t.TempDir(), "build"), set); !ok || err != nil {
		t.Errorf("FetchSnapshotWith: %v, %v", ok, err)
	}
	if _, ok, err := mirror.FetchSnapshot(ctx, url, sha, filepath.Join(t.TempDir(), "build")); ok || err == nil {
		t.Errorf("anonymous FetchSnapshot of a private repository: %v, %v", ok, err)
	}

	// No token on disk: the mirror keeps no remote configuration.
	tok, _ := set.Source(s.host.Name).Token(ctx, "acme")
	assertNotInTree(t, root, tok, "ghs_")
}

// An App whose API cannot be reached is the host unreachable: the reason
// the collection's bounded attempts count (it retried for as long as the
// host was down before).
func TestAppUnreachableIsTheHostUnreachable(t *testing.T) {
	s := newStack(t)
	set := s.set(t)
	up, err := s.f.GoDown()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := up(); err != nil {
			t.Fatal(err)
		}
	}()
	m, err := mirror.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetCredentials(set)
	_, err = m.Sync(context.Background(), s.host.CloneURL("acme", "vault"))
	if c := errclass.Classify(err); c.Class != errclass.Retryable || c.Reason != errclass.ReasonUnreachable {
		t.Fatalf("a sync while the host is down: %v (%s/%s), want Retryable %q", err, c.Class, c.Reason, errclass.ReasonUnreachable)
	}
}

// An App whose key the host refuses fails the fetch as the credentials'
// failure (Permanent, ReasonCredentials), never as git refusing the
// repository, which would be asked about and charged to it.
func TestMisconfiguredApp(t *testing.T) {
	s := newStack(t)
	other, err := s.f.CreateApp("other")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.key, other.KeyPEM, 0o600); err != nil { // the wrong key
		t.Fatal(err)
	}
	set := s.set(t)
	m, err := mirror.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetCredentials(set)
	_, err = m.Sync(context.Background(), s.host.CloneURL("acme", "vault"))
	c := errclass.Classify(err)
	if c.Class != errclass.Permanent || c.Reason != ReasonCredentials || !strings.Contains(err.Error(), "the GitHub App (id 1)") {
		t.Fatalf("sync with a refused App key: %v (%s/%s), want Permanent %q", err, c.Class, c.Reason, ReasonCredentials)
	}
	if n := s.f.GitRequests(); n != 0 {
		t.Errorf("%d Git requests sent without a token", n)
	}
}

// assertNotInTree fails when a file under root holds one of needles.
func assertNotInTree(t *testing.T, root string, needles ...string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if n != "" && bytes.Contains(b, []byte(n)) {
				t.Errorf("%s holds %q", p, n[:4])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The installation's directory: it sees every repository of an owner it
// was granted all of, not one it was granted a selection of; a private
// repository transferred to another installation's account is found by
// id there.
func TestAppDirectory(t *testing.T) {
	s := newStack(t)
	set := s.set(t)
	ctx := context.Background()
	if err := s.f.CreateOrg("beta"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.f.CreateRepo("beta", "tools"); err != nil {
		t.Fatal(err)
	}
	beta, err := s.f.InstallApp(s.app.ID, "beta", "tools")
	if err != nil {
		t.Fatal(err)
	}
	dir, why, err := set.Directory(ctx, s.host, "acme")
	if err != nil || dir == nil || why != "" {
		t.Fatalf("Directory(acme) = %v, %q, %v", dir, why, err)
	}
	vault, err := dir.Repository(ctx, "acme", "vault")
	if err != nil || !vault.Private {
		t.Fatalf("private repository through the installation: %+v, %v", vault, err)
	}
	// An installation never proves a deletion, even one granted every
	// repository of its account: a repository transferred to an account
	// the App is not installed on answers it 404 (below).
	if got, err := dir.ProvesGone(ctx); got || err != nil {
		t.Errorf("ProvesGone = %v, %v; want false", got, err)
	}
	if err := s.f.Transfer("acme", "vault", "beta"); err != nil {
		t.Fatal(err)
	}
	if err := s.f.SetInstallationRepos(beta.ID, "tools", "vault"); err != nil {
		t.Fatal(err)
	}
	got, err := dir.RepositoryByID(ctx, vault.ExternalID)
	if err != nil || got.Owner != "beta" {
		t.Errorf("RepositoryByID after a transfer to another installation: %+v, %v", got, err)
	}
	_, why, err = set.Directory(ctx, s.host, "nobody")
	if err != nil || !strings.Contains(why, "is not installed on nobody") {
		t.Errorf("Directory(nobody): why %q, %v", why, err)
	}
}

// A token file names a token per owner and one for the others; its
// errors never quote a token, even one written where a path belongs.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("acme.tok", "ghp_acmeToken123\n")
	write("any.tok", "ghp_anyToken456\n")
	write("tokens", "# owner token-file\nacme acme.tok\n* "+filepath.Join(dir, "any.tok")+"\nbeta ghp_writtenInPlace789\n")
	f, err := NewTokenFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for owner, want := range map[string]string{"ACME": "ghp_acmeToken123", "other": "ghp_anyToken456"} {
		if got, err := f.Token(ctx, owner); got != want || err != nil {
			t.Errorf("Token(%s) = %q, %v", owner, got, err)
		}
	}
	_, err = f.Token(ctx, "beta")
	if err == nil || strings.Contains(err.Error(), "ghp_written") {
		t.Errorf("Token(beta) = %v: want an error that does not quote the token", err)
	}
	write("tokens2", "acme\n")
	if _, err := NewTokenFile(filepath.Join(dir, "tokens2")); err == nil {
		t.Errorf("a line without a path was accepted")
	}
	write("tokens3", "acme acme.tok\n")
	f3, _ := NewTokenFile(filepath.Join(dir, "tokens3"))
	if _, err := f3.Token(ctx, "beta"); !errors.Is(err, ErrNoToken) {
		t.Errorf("Token for an owner the file does not name: %v, want ErrNoToken", err)
	}
}

// Credentials go over https, or plain http to this machine only.
func TestCredentialsOnlyOverHTTPS(t *testing.T) {
	for url, ok := range map[string]bool{
		"https://github.example/acme/x.git": true,
		"http://127.0.0.1:7480/acme/x.git":  true,
		"http://localhost:7480/acme/x.git":  true,
		"http://[::1]:7480/acme/x.git":      true,
		"http://git.example/acme/x.git":     false,
		"http://10.0.0.5/acme/x.git":        false,
	} {
		if err := credentialsSafe(url, false); (err == nil) != ok {
			t.Errorf("credentialsSafe(%s) = %v, want ok %v", url, err, ok)
		}
	}
	hosts, err := vcs.HostsFromEnv(func(k string) string {
		return map[string]string{vcs.EnvAPIURL: "http://git.example/api/v3/", vcs.EnvTokensFile: "/nonexistent"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromHosts(hosts, AppOptions{}); err == nil {
		t.Errorf("a token file for a plain-http host was accepted")
	}
}

// The installation's rate gate: once an answer says the limit is spent,
// no request goes out until it resets.
func TestGateHoldsRateLimit(t *testing.T) {
	c := &clock{t: time.Now()}
	g := newGate(2, c.Now)
	leave, err := g.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	leave()
	g.observe(rateLimited(c.Now().Add(time.Minute)))
	_, err = g.enter(context.Background())
	if cl := errclass.Classify(err); cl.Reason != errclass.ReasonRateLimited || cl.RetryAfter < 59*time.Second {
		t.Errorf("after a rate limit: %v (%+v), want rate limited for a minute", err, cl)
	}
	c.Add(time.Minute)
	if leave, err := g.enter(context.Background()); err != nil {
		t.Errorf("after the reset: %v", err)
	} else {
		leave()
	}
}

// An installation token the API refuses mid-way (401: it ended early) is
// renewed for API lookups as for Git requests: the lookup is made once
// more with a fresh token and answers. One refused again fails naming the
// credentials (reason credentials), never as an answer about the
// repository. (Before, the lookup failed "401 Bad credentials".)
func TestDirectoryRenewsARefusedToken(t *testing.T) {
	s := newStack(t)
	set := s.set(t)
	ctx := context.Background()
	dir, _, err := set.Directory(ctx, s.host, "acme")
	if err != nil || dir == nil {
		t.Fatalf("Directory(acme) = %v, %v", dir, err)
	}
	vault, err := dir.Repository(ctx, "acme", "vault")
	if err != nil {
		t.Fatal(err)
	}
	minted := s.f.InstallationTokensMinted()
	s.f.ExpireInstallationTokens()
	if r, err := dir.RepositoryByID(ctx, vault.ExternalID); err != nil || r.Name != "vault" {
		t.Fatalf("lookup by id across an expired token: %+v, %v", r, err)
	}
	s.f.ExpireInstallationTokens()
	if r, err := dir.Repository(ctx, "acme", "vault"); err != nil || r.ExternalID != vault.ExternalID {
		t.Fatalf("lookup by name across an expired token: %+v, %v", r, err)
	}
	if n := s.f.InstallationTokensMinted() - minted; n != 2 {
		t.Errorf("%d tokens minted across two expiries, want 2", n)
	}
	defer s.f.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/repos/acme/vault", Status: http.StatusUnauthorized})()
	_, err = dir.Repository(ctx, "acme", "vault")
	c := errclass.Classify(err)
	if c.Class != errclass.Permanent || c.Reason != ReasonCredentials ||
		!strings.Contains(err.Error(), "the API refused the GitHub App (id "+itoa(s.app.ID)+")'s token for acme (401)") {
		t.Errorf("a token refused twice: %v (%+v), want Permanent %q naming the App", err, c, ReasonCredentials)
	}
}

// Right after an uninstall the installation's last token is refused: it
// is dropped at once, the installations listed again, and the owner read
// anonymously; the lookup that explains the refusal is told "not
// installed" rather than handed the refused token. (Before, a token less
// than a minute old was kept: the explanation failed on it.)
func TestUninstallIsFoundOutAtOnce(t *testing.T) {
	s := newStack(t)
	set := s.set(t)
	ctx := context.Background()
	url := s.host.CloneURL("acme", "vault")
	tok, err := set.GitToken(ctx, url)
	if err != nil || tok == "" {
		t.Fatalf("GitToken = %q, %v", tok, err)
	}
	if err := s.f.Uninstall(s.inst.ID); err != nil {
		t.Fatal(err)
	}
	set.GitTokenRefused(url, tok)
	if again, err := set.GitToken(ctx, url); again != "" || err != nil {
		t.Errorf("GitToken after the refusal of an uninstalled App's token = %q (the same: %v), %v; want anonymous", again, again == tok, err)
	}
	dir, why, err := set.Directory(ctx, s.host, "acme")
	if dir != nil || err != nil || !strings.Contains(why, "is not installed on acme") {
		t.Errorf("Directory(acme) after the uninstall = %v, %q, %v; want none, not installed", dir, why, err)
	}
}

// A token file's token for an owner is a member's: its 404 for an id
// proves nothing (a repository transferred to an account the member cannot
// see answers it too), and it is asked again, read from the file anew,
// when the API refuses it.
func TestTokenFileDirectory(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	bot, err := s.f.AddUser("acme-bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.f.AddMember("acme", "acme-bot"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "acme.token"), []byte(bot.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte("acme acme.token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := s.host
	h.AppID, h.AppKeyFile, h.TokensFile = 0, "", filepath.Join(dir, "tokens")
	hosts, err := vcs.NewHosts(h)
	if err != nil {
		t.Fatal(err)
	}
	set, err := FromHosts(hosts, AppOptions{Now: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := set.Directory(ctx, h, "acme")
	if err != nil || d == nil {
		t.Fatalf("Directory(acme) = %v, %v", d, err)
	}
	vault, err := d.Repository(ctx, "acme", "vault")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := d.ProvesGone(ctx); ok || err != nil {
		t.Errorf("a member's token proves a deletion: %v, %v", ok, err)
	}
	if err := s.f.CreateOrg("elsewhere"); err != nil {
		t.Fatal(err)
	}
	if err := s.f.Transfer("acme", "vault", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RepositoryByID(ctx, vault.ExternalID); errclass.Classify(err).Reason != errclass.ReasonNotFound {
		t.Errorf("the transferred repository by id, to the member: %v, want 404", err)
	}
	// The token rotated: the file holds the new one when the old is refused.
	s.f.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/repos/elsewhere", Times: 1, Before: func(*http.Request) {
		rotated, err := s.f.RotateToken("acme-bot")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "acme.token"), []byte(rotated.Token+"\n"), 0o600)
		}
		if err != nil {
			t.Error(err)
		}
	}})
	if err := s.f.AddMember("elsewhere", "acme-bot"); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Repository(ctx, "elsewhere", "vault"); err != nil || r.ExternalID != vault.ExternalID {
		t.Errorf("lookup across a rotated token: %+v, %v", r, err)
	}
}

// recordingTransport keeps the bodies of the requests it carries.
type recordingTransport struct {
	mu     sync.Mutex
	bodies map[string][]string // "METHOD path" → bodies
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.mu.Lock()
	if r.bodies == nil {
		r.bodies = map[string][]string{}
	}
	k := req.Method + " " + req.URL.Path
	r.bodies[k] = append(r.bodies[k], string(body))
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// An installation token is asked for read access only (contents,
// metadata) however much the App was granted on the account, and a token
// granted more — an API that ignores the request — is refused, Permanent
// and naming what it grants, revoked, and never cached nor used: each
// fetch mints again and is refused again until the API answers as asked.
// (Before, tokens were minted with no body, so an App granted
// administration:write got tokens that could administer every repository,
// and a write token was cached and used.)
func TestInstallationTokensAreReadOnly(t *testing.T) {
	s := newStack(t)
	if err := s.f.SetAppPermissions(s.app.ID, map[string]string{"contents": "write", "metadata": "read", "administration": "write"}); err != nil {
		t.Fatal(err)
	}
	rec := &recordingTransport{}
	set, err := FromHosts(s.hosts, AppOptions{Now: s.clock.Now, HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vault := s.host.CloneURL("acme", "vault")

	tok, err := set.GitToken(ctx, vault)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := s.f.InstallationTokenGrant(tok)
	if want := map[string]string{"contents": "read", "metadata": "read"}; !maps.Equal(g.Permissions, want) {
		t.Errorf("the token was granted %v, want %v", g.Permissions, want)
	}
	rec.mu.Lock()
	bodies := rec.bodies["POST /api/v3/app/installations/"+itoa(s.inst.ID)+"/access_tokens"]
	rec.mu.Unlock()
	if len(bodies) != 1 || !strings.Contains(bodies[0], `"permissions":{"contents":"read","metadata":"read"}`) {
		t.Errorf("mint request bodies %q, want the read permissions asked", bodies)
	}
	if _, err := mirror.ListRefsWith(ctx, vault, set); err != nil {
		t.Errorf("ls-remote with the read-only token: %v", err)
	}

	// The API grants write whatever was asked.
	if err := s.f.OverGrant(s.inst.ID, map[string]string{"contents": "write", "administration": "write"}); err != nil {
		t.Fatal(err)
	}
	s.clock.Add(time.Hour) // the cached token is due for renewal
	for i := range 2 {
		minted := s.f.InstallationTokensMinted()
		tok, err := set.GitToken(ctx, vault)
		var ce *errclass.Error
		if tok != "" || !errors.As(err, &ce) || ce.Class != errclass.Permanent || ce.Reason != ReasonCredentials ||
			!strings.Contains(err.Error(), "administration: write, contents: write") {
			t.Fatalf("attempt %d: GitToken with an over-granted token = %q, %v; want Permanent %q naming what it grants", i, tok, err, ReasonCredentials)
		}
		if s.f.InstallationTokensMinted() != minted+1 {
			t.Errorf("attempt %d: %d minted, want one more (a refused token is not cached)", i, s.f.InstallationTokensMinted()-minted)
		}
		all := s.f.InstallationTokens()
		last := all[len(all)-1]
		if g, _ := s.f.InstallationTokenGrant(last); !g.Revoked {
			t.Errorf("attempt %d: the refused token is still live", i)
		}
		if strings.Contains(err.Error(), last) {
			t.Errorf("attempt %d: the error carries the token", i)
		}
	}
	if _, err := mirror.ListRefsWith(ctx, vault, set); errclass.Classify(err).Class != errclass.Permanent {
		t.Errorf("ls-remote while tokens are over-granted: %v, want Permanent", err)
	}
	if err := s.f.OverGrant(s.inst.ID, nil); err != nil {
		t.Fatal(err)
	}
	if tok, err := set.GitToken(ctx, vault); err != nil || tok == "" {
		t.Errorf("once the API answers as asked: %q, %v", tok, err)
	}
}
