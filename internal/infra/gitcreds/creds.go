package gitcreds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"gitfleet/internal/domain/identity"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/vcs"
)

// Source answers which token reads an owner's repositories on one host.
type Source interface {
	// Token returns it; an error wrapping ErrNotInstalled or ErrNoToken
	// when the source has none for owner (gitfleet then reads anonymously).
	Token(ctx context.Context, owner string) (string, error)
	// Refused tells that the host refused token (401): the next Token
	// must not return it.
	Refused(owner, token string)
	// Kind names the source in messages.
	Kind() string
}

// none reports a source's "no token for this owner".
func none(err error) bool { return errors.Is(err, ErrNotInstalled) || errors.Is(err, ErrNoToken) }

// Set is the worker's credentials: a source per configured host.
type Set struct {
	hosts vcs.Hosts
	by    map[string]Source
}

// NewSet builds a Set from sources by host name.
func NewSet(hosts vcs.Hosts, sources map[string]Source) *Set {
	by := map[string]Source{}
	for n, s := range sources {
		by[strings.ToLower(n)] = s
	}
	return &Set{hosts: hosts, by: by}
}

// FromHosts builds the Set the hosts' settings describe (vcs.Host.AppID,
// AppKeyFile, TokensFile): the App's key is read from its file now, so a
// worker that cannot read it does not start. A host with both an App and a
// token file uses the file for owners the App is not installed on.
func FromHosts(hosts vcs.Hosts, o AppOptions) (*Set, error) {
	sources := map[string]Source{}
	for _, n := range hosts.Names() {
		h, _ := hosts.Lookup(n)
		var chain []Source
		if h.AppID != 0 || h.AppKeyFile != "" {
			if h.AppID == 0 || h.AppKeyFile == "" {
				return nil, fmt.Errorf("host %s: a GitHub App needs both %s and %s", n, vcs.EnvAppID, vcs.EnvAppKeyFile)
			}
			b, err := os.ReadFile(h.AppKeyFile)
			if err != nil {
				return nil, fmt.Errorf("host %s: the App's private key: %w", n, err)
			}
			key, err := ParseKey(b)
			if err != nil {
				return nil, fmt.Errorf("host %s: the App's private key %s: %w", n, h.AppKeyFile, err)
			}
			app, err := NewApp(h, h.AppID, key, o)
			if err != nil {
				return nil, fmt.Errorf("host %s: %w", n, err)
			}
			chain = append(chain, app)
		}
		if h.TokensFile != "" {
			f, err := NewTokenFile(h.TokensFile)
			if err != nil {
				return nil, fmt.Errorf("host %s: %w", n, err)
			}
			chain = append(chain, f)
		}
		switch len(chain) {
		case 0:
			continue
		case 1:
			sources[n] = chain[0]
		default:
			sources[n] = chained(chain)
		}
		if err := credentialsSafe(h.GitURL, h.AllowPlainHTTPToken); err != nil {
			return nil, fmt.Errorf("host %s: %w", n, err)
		}
	}
	return NewSet(hosts, sources), nil
}

// Empty reports a Set with no source: every read is anonymous.
func (s *Set) Empty() bool { return s == nil || len(s.by) == 0 }

// Source is host's source, nil when it has none.
func (s *Set) Source(host string) Source {
	if s == nil {
		return nil
	}
	return s.by[strings.ToLower(host)]
}

// locate finds the configured host a remote URL belongs to and the owner
// it names.
func (s *Set) locate(remoteURL string) (vcs.Host, string, bool) {
	for _, n := range s.hosts.Names() {
		h, _ := s.hosts.Lookup(n)
		if !strings.HasPrefix(strings.ToLower(remoteURL), strings.ToLower(h.GitURL)) {
			continue
		}
		id, err := h.RepositoryAt(h.GitURL + remoteURL[len(h.GitURL):])
		if err != nil {
			return vcs.Host{}, "", false
		}
		return h, id.Owner, true
	}
	return vcs.Host{}, "", false
}

// GitToken is the token a Git request to remoteURL authenticates with (the
// mirror's Credentials): the source's for the owner the URL names, "" for
// a URL of no configured host, or an owner the source has nothing for
// (read anonymously). A token goes only over https, or plain http to a
// loopback address.
func (s *Set) GitToken(ctx context.Context, remoteURL string) (string, error) {
	if s.Empty() {
		return "", nil
	}
	h, owner, ok := s.locate(remoteURL)
	if !ok {
		return "", nil
	}
	src := s.by[h.Name]
	if src == nil {
		return "", nil
	}
	if err := credentialsSafe(remoteURL, h.AllowPlainHTTPToken); err != nil {
		return "", err
	}
	tok, err := src.Token(ctx, owner)
	if none(err) {
		return "", nil
	}
	if err != nil {
		return "", credentialsError(src, owner, err)
	}
	return tok, nil
}

// ReasonCredentials is the reason of a failure to get a token: the App's
// key refused, its API down, a token file unreadable. It is gitfleet's
// failure, not the repository's: neither a refusal that the API is asked
// to explain nor a strike against the repository (§2).
const ReasonCredentials = "credentials"

// credentialsError keeps a transient failure Retryable (with its delay)
// and makes any other Permanent, both of reason ReasonCredentials: a 401
// or 404 from the App's endpoints must not read as git refusing the
// repository.
//
// The App's API unreachable is the host unreachable, and keeps that
// reason: a collection gives up after the same bounded attempts as when
// git cannot reach it, instead of retrying for as long as it is down.
func credentialsError(src Source, owner string, err error) error {
	c := errclass.Classify(err)
	class, reason := errclass.Permanent, ReasonCredentials
	if c.Class == errclass.Retryable && c.Reason != "unclassified" {
		class = errclass.Retryable
	}
	if c.Reason == errclass.ReasonUnreachable {
		reason = errclass.ReasonUnreachable
	}
	return &errclass.Error{Class: class, Reason: reason, RetryAfter: c.RetryAfter,
		Err: fmt.Errorf("%s cannot give a token for %s: %w", src.Kind(), owner, err)}
}

// GitTokenRefused tells the source that the host refused its token.
func (s *Set) GitTokenRefused(remoteURL, token string) {
	if s.Empty() {
		return
	}
	if h, owner, ok := s.locate(remoteURL); ok {
		if src := s.by[h.Name]; src != nil {
			src.Refused(owner, token)
		}
	}
}

// credentialsSafe refuses plain http that is not to this machine.
func credentialsSafe(rawURL string, allowPlain bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return errclass.Permanentf(errclass.ReasonInvalidInput, "bad repository URL")
	}
	if strings.EqualFold(u.Scheme, "https") || allowPlain {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return errclass.Permanentf(errclass.ReasonInvalidInput,
		"refusing to send credentials to %s over plain http (set %s=1 to allow it)", u.Host, vcs.EnvAllowPlainHTTPToken)
}

// Directory is the API directory that reads owner's repositories on h with
// the source's token, and nil when the source has none for owner (then the
// host's own, vcs.NewGitHub, answers). why says, for messages, why there
// is none ("the App is not installed on acme").
func (s *Set) Directory(ctx context.Context, h vcs.Host, owner string) (dir vcs.Directory, why string, err error) {
	src := s.Source(h.Name)
	if src == nil {
		return nil, "", nil
	}
	return directory(ctx, src, h, owner)
}

func directory(ctx context.Context, src Source, h vcs.Host, owner string) (vcs.Directory, string, error) {
	switch src := src.(type) {
	case *App:
		if _, err := src.installationOf(ctx, owner); none(err) {
			return nil, fmt.Sprintf("the GitHub App (id %d) is not installed on %s", src.id, owner), nil
		} else if err != nil {
			return nil, "", err
		}
		return &appDirectory{app: src, owner: owner}, "", nil
	case chained:
		var whys []string
		for _, s := range src {
			d, why, err := directory(ctx, s, h, owner)
			if d != nil || err != nil {
				return d, "", err
			}
			whys = append(whys, why)
		}
		return nil, strings.Join(whys, "; "), nil
	}
	if _, err := src.Token(ctx, owner); none(err) {
		return nil, fmt.Sprintf("%s has no token for %s", src.Kind(), owner), nil
	} else if err != nil {
		return nil, "", err
	}
	return &tokenDirectory{src: src, host: h, owner: owner}, "", nil
}

// renewed runs ask with a client for account's token; when the API refuses
// that token (401: expired early, revoked), the source drops it and ask
// runs once more with the token it gives next — as a Git request does
// (mirror.authed) — so a token that ends mid-collection is renewed for API
// lookups too. A token refused again, or not replaced, fails naming the
// credentials, of reason ReasonCredentials: it is no answer about the
// repository.
func renewed(ctx context.Context, src Source, account string, client func(context.Context, string) (*vcs.GitHub, string, error),
	ask func(*vcs.GitHub) error) error {
	c, tok, err := client(ctx, account)
	if err != nil {
		return err
	}
	err = ask(c)
	if !vcs.Unauthorized(err) {
		return err
	}
	src.Refused(account, tok)
	again, next, cerr := client(ctx, account)
	if cerr == nil && next != tok {
		if err = ask(again); !vcs.Unauthorized(err) {
			return err
		}
	}
	return &errclass.Error{Class: errclass.Permanent, Reason: ReasonCredentials,
		Err: fmt.Errorf("the API refused %s's token for %s (401), renewed or not: %w", src.Kind(), account, err)}
}

// appDirectory answers as owner's installation.
type appDirectory struct {
	app   *App
	owner string
}

func (d *appDirectory) ask(ctx context.Context, account string, f func(*vcs.GitHub) error) error {
	return renewed(ctx, d.app, account, d.app.client, f)
}

// Repository asks owner's installation.
func (d *appDirectory) Repository(ctx context.Context, owner, name string) (r identity.Repository, err error) {
	err = d.ask(ctx, d.owner, func(c *vcs.GitHub) error {
		r, err = c.Repository(ctx, owner, name)
		return err
	})
	return r, err
}

// ProvesGone: never. An installation sees the repositories of the accounts
// the App is installed on; one transferred to any other account answers
// its 404 as a deleted one does (§3: a site administrator's GITHUB_TOKEN
// proves a deletion).
func (d *appDirectory) ProvesGone(context.Context) (bool, error) { return false, nil }

// RepositoryByID asks owner's installation, then the App's other ones (at
// most maxTransferLookups of them: each costs a token): a private
// repository transferred to another account the App is installed on is
// found where it went.
func (d *appDirectory) RepositoryByID(ctx context.Context, externalID string) (identity.Repository, error) {
	byID := func(account string) (r identity.Repository, err error) {
		err = d.ask(ctx, account, func(c *vcs.GitHub) error {
			r, err = c.RepositoryByID(ctx, externalID)
			return err
		})
		return r, err
	}
	r, err := byID(d.owner)
	if err == nil || errclass.Classify(err).Reason != errclass.ReasonNotFound {
		return r, err
	}
	accounts, lerr := d.app.Installations(ctx)
	if lerr != nil {
		return identity.Repository{}, lerr
	}
	asked := 0
	for _, acc := range accounts {
		if strings.EqualFold(acc, d.owner) {
			continue
		}
		if asked++; asked > maxTransferLookups {
			break
		}
		r, oerr := byID(acc)
		if none(oerr) {
			continue
		}
		if oerr == nil || errclass.Classify(oerr).Reason != errclass.ReasonNotFound {
			return r, oerr
		}
	}
	return identity.Repository{}, err
}

// maxTransferLookups bounds the other installations a lookup by id asks.
const maxTransferLookups = 20

// tokenDirectory answers with the token a source configures for owner
// (a token file's), read at each lookup.
type tokenDirectory struct {
	src   Source
	host  vcs.Host
	owner string
}

func (d *tokenDirectory) client(ctx context.Context, owner string) (*vcs.GitHub, string, error) {
	tok, err := d.src.Token(ctx, owner)
	if err != nil {
		return nil, "", err
	}
	h := d.host
	h.Token = tok
	c, err := vcs.NewGitHub(h, nil)
	return c, tok, err
}

func (d *tokenDirectory) ask(ctx context.Context, f func(*vcs.GitHub) error) error {
	return renewed(ctx, d.src, d.owner, d.client, f)
}

func (d *tokenDirectory) Repository(ctx context.Context, owner, name string) (r identity.Repository, err error) {
	err = d.ask(ctx, func(c *vcs.GitHub) error {
		r, err = c.Repository(ctx, owner, name)
		return err
	})
	return r, err
}

func (d *tokenDirectory) RepositoryByID(ctx context.Context, externalID string) (r identity.Repository, err error) {
	err = d.ask(ctx, func(c *vcs.GitHub) error {
		r, err = c.RepositoryByID(ctx, externalID)
		return err
	})
	return r, err
}

// ProvesGone: only when the configured token is a site administrator's
// (vcs.GitHub.ProvesGone); a machine user's, a member of the owner, is not.
func (d *tokenDirectory) ProvesGone(ctx context.Context) (ok bool, err error) {
	err = d.ask(ctx, func(c *vcs.GitHub) error {
		ok, err = c.ProvesGone(ctx)
		return err
	})
	return ok, err
}

// chained asks its sources in order: the first that has a token for the
// owner answers.
type chained []Source

func (c chained) Token(ctx context.Context, owner string) (string, error) {
	var err error
	for _, s := range c {
		var tok string
		if tok, err = s.Token(ctx, owner); !none(err) {
			return tok, err
		}
	}
	return "", err
}

func (c chained) Refused(owner, token string) {
	for _, s := range c {
		s.Refused(owner, token)
	}
}

func (c chained) Kind() string {
	kinds := make([]string, len(c))
	for i, s := range c {
		kinds[i] = s.Kind()
	}
	return strings.Join(kinds, " or ")
}
