package vcs

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
)

// Directory answers "which repository is owner/name now?". Errors are
// classified by errclass (404 Permanent, rate limits Retryable with delay).
type Directory interface {
	Repository(ctx context.Context, owner, name string) (identity.Repository, error)
	// RepositoryByID looks a repository up by its external id, wherever it
	// lives now.
	RepositoryByID(ctx context.Context, externalID string) (identity.Repository, error)
	// ProvesGone reports whether the directory's 404 for a repository id
	// proves the repository deleted: its token sees every repository of
	// the host wherever it went (a site administrator's, on GitHub
	// Enterprise Server). Any other token's 404 may be a repository moved
	// out of its sight — transferred to an account it cannot read, made
	// private — so it proves nothing (§3).
	ProvesGone(ctx context.Context) (bool, error)
}

// Host is one configured Git host.
type Host struct {
	// Name is how users and the database write the host: "github.com",
	// "ghe.example.com", "127.0.0.1:7480".
	Name string
	// GitURL is the base of clone URLs, with a trailing slash.
	GitURL string
	// APIURL is the REST API base, with a trailing slash.
	APIURL string
	// Token authenticates API requests. It is read from the environment by
	// the worker and never leaves the process: not in workflow inputs, not in
	// logs, not in the database.
	Token string
	// AllowPlainHTTPToken lets tokens go to a plain-http API that is not on
	// this machine (refused otherwise).
	AllowPlainHTTPToken bool
	// AppID and AppKeyFile name the GitHub App whose installations read
	// the host's private repositories (gitcreds); the key is read from the
	// file, never from the environment.
	AppID      int64
	AppKeyFile string
	// TokensFile names, per owner, the file holding the token that reads
	// its repositories, for hosts without an App (gitcreds.TokenFile).
	TokensFile string
}

// String never prints the token.
func (h Host) String() string { return fmt.Sprintf("%s (git %s, api %s)", h.Name, h.GitURL, h.APIURL) }

// CloneURL is the HTTPS clone URL of owner/name.
func (h Host) CloneURL(owner, name string) string {
	return h.GitURL + url.PathEscape(owner) + "/" + url.PathEscape(name) + ".git"
}

// RepositoryAt is the inverse of CloneURL: which owner/name a clone URL
// (typically the one a redirect led to) names on this host.
func (h Host) RepositoryAt(cloneURL string) (repoid.ID, error) {
	rest, ok := strings.CutPrefix(cloneURL, h.GitURL)
	if !ok {
		return repoid.ID{}, fmt.Errorf("%w: %s is not a repository URL of %s", repoid.ErrInvalid, cloneURL, h.Name)
	}
	return repoid.Parse(h.Name+"/"+strings.TrimSuffix(rest, "/"), "")
}

// Hosts is the set of configured hosts.
type Hosts struct {
	hosts       map[string]Host
	defaultHost string
}

// NewHosts builds a host set; the first host is the default for requests
// written as owner/name.
func NewHosts(hosts ...Host) (Hosts, error) {
	hs := Hosts{hosts: map[string]Host{}}
	for _, h := range hosts {
		h.Name = strings.ToLower(h.Name)
		if err := repoid.ValidHost(h.Name); err != nil {
			return Hosts{}, err
		}
		for _, base := range []*string{&h.GitURL, &h.APIURL} {
			u, err := url.Parse(*base)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				return Hosts{}, fmt.Errorf("host %s: %q is not an http(s) base URL without credentials", h.Name, *base)
			}
			if !strings.HasSuffix(*base, "/") {
				*base += "/"
			}
		}
		if _, dup := hs.hosts[h.Name]; dup {
			return Hosts{}, fmt.Errorf("host %s configured twice", h.Name)
		}
		hs.hosts[h.Name] = h
		if hs.defaultHost == "" {
			hs.defaultHost = h.Name
		}
	}
	return hs, nil
}

// Environment variables read by HostsFromEnv.
const (
	EnvAPIURL = "GITHUB_API_URL" // default https://api.github.com/
	EnvToken  = "GITHUB_TOKEN"   // optional
	EnvHost   = "GITFLEET_HOST"  // optional: the host name users write; default derived from the API URL
	EnvGitURL = "GITFLEET_GIT_URL"
	// The credentials that read private repositories (gitcreds).
	EnvAppID      = "GITFLEET_GITHUB_APP_ID"
	EnvAppKeyFile = "GITFLEET_GITHUB_APP_KEY_FILE"
	EnvTokensFile = "GITFLEET_GIT_TOKENS_FILE"
)

// HostsFromEnv configures one GitHub-compatible host from the environment:
// github.com by default, or a GitHub Enterprise Server (or the test forge)
// when GITHUB_API_URL points elsewhere.
func HostsFromEnv(getenv func(string) string) (Hosts, error) {
	api := getenv(EnvAPIURL)
	if api == "" {
		api = "https://api.github.com/"
	}
	u, err := url.Parse(api)
	if err != nil || u.Host == "" {
		return Hosts{}, fmt.Errorf("%s=%q is not a URL", EnvAPIURL, api)
	}
	h := Host{Name: getenv(EnvHost), GitURL: getenv(EnvGitURL), APIURL: api, Token: getenv(EnvToken),
		AllowPlainHTTPToken: getenv(EnvAllowPlainHTTPToken) == "1",
		AppKeyFile:          getenv(EnvAppKeyFile), TokensFile: getenv(EnvTokensFile)}
	if v := getenv(EnvAppID); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return Hosts{}, fmt.Errorf("%s=%q: want the App's numeric id", EnvAppID, v)
		}
		h.AppID = id
	}
	if strings.EqualFold(u.Host, "api.github.com") {
		h.Name = cmpOr(h.Name, "github.com")
		h.GitURL = cmpOr(h.GitURL, "https://github.com/")
	} else {
		// GitHub Enterprise Server serves git from the API's origin.
		h.Name = cmpOr(h.Name, u.Host)
		h.GitURL = cmpOr(h.GitURL, u.Scheme+"://"+u.Host+"/")
	}
	return NewHosts(h)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Default is the host assumed for requests written as owner/name.
func (hs Hosts) Default() string { return hs.defaultHost }

// Names lists the configured host names, sorted.
func (hs Hosts) Names() []string {
	names := make([]string, 0, len(hs.hosts))
	for n := range hs.hosts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns the host called name.
func (hs Hosts) Lookup(name string) (Host, error) {
	h, ok := hs.hosts[strings.ToLower(name)]
	if !ok {
		return Host{}, fmt.Errorf("%w: unknown host %q (configured: %s; set %s to use another)",
			repoid.ErrInvalid, name, strings.Join(hs.Names(), ", "), EnvAPIURL)
	}
	return h, nil
}

// Parse parses a user's repository reference and checks its host is known.
func (hs Hosts) Parse(input string) (repoid.ID, error) {
	id, err := repoid.Parse(input, hs.defaultHost)
	if err != nil {
		return repoid.ID{}, err
	}
	if _, err := hs.Lookup(id.Host); err != nil {
		return repoid.ID{}, err
	}
	return id, nil
}

// ByAPIURL finds the host whose API is apiURL (trailing slash optional).
func (hs Hosts) ByAPIURL(apiURL string) (Host, bool) {
	want := strings.TrimSuffix(strings.ToLower(apiURL), "/")
	for _, h := range hs.hosts {
		if strings.TrimSuffix(strings.ToLower(h.APIURL), "/") == want {
			return h, true
		}
	}
	return Host{}, false
}
