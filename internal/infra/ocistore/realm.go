package ocistore

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/net/publicsuffix"

	"gitfleet/internal/infra/errclass"
)

// KeepCredentials returns base guarded so that what authenticates a
// client to registry — the peer token, the keychain's credentials for
// that registry — reaches that registry's own site only: its host and
// port, or another host of its registrable domain (Docker Hub's registry
// index.docker.io and its token service auth.docker.io; registry.gitlab.com
// and gitlab.com), never a host of another domain nor, for a registry
// named by address or a single label (a peer, localhost), any other host.
//
// go-containerregistry sends them elsewhere in one case: a registry that
// answers with a Bearer challenge names the token service ("realm") the
// client then gives its credentials to, and the realm may be any public
// host. So a registry, or a peer, could have them sent to a host of its
// choosing. Through this guard a request to a host off the site goes
// without an Authorization header — a token service elsewhere is asked
// anonymously, which is enough for public images — and one carrying a
// refresh token or a password in its form (the OAuth exchange) is not
// sent at all.
func KeepCredentials(registry name.Registry, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &credentialGuard{registry: registry, base: base}
}

type credentialGuard struct {
	registry name.Registry
	base     http.RoundTripper
}

// ErrCredentialsElsewhere is wrapped by the error of a request that would
// have carried a registry's credentials to another host.
var ErrCredentialsElsewhere = errors.New("a registry's credentials go to that registry only")

func (g *credentialGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.own(req) {
		return g.base.RoundTrip(req)
	}
	if req.Method == http.MethodPost && formCredentials(req) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errclass.Wrap(errclass.Permanent, errclass.ReasonPermissionDenied, fmt.Errorf(
			"registry %s asks for its token at %s, another host: %w", g.registry.RegistryStr(), req.URL.Host, ErrCredentialsElsewhere))
	}
	if req.Header.Get("Authorization") != "" {
		req = req.Clone(req.Context())
		req.Header.Del("Authorization")
	}
	return g.base.RoundTrip(req)
}

// own reports a request to the registry's site: its host and port (its
// scheme's default port when it names none), or a host of the same
// registrable domain (public suffix list) when the registry is named by a
// domain.
func (g *credentialGuard) own(req *http.Request) bool {
	scheme := strings.ToLower(req.URL.Scheme)
	if canonicalHost(req.URL.Host, scheme) == canonicalHost(g.registry.RegistryStr(), scheme) {
		return true
	}
	site := func(hostport string) string {
		h := strings.ToLower(hostport)
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
		if net.ParseIP(h) != nil || !strings.Contains(h, ".") {
			return ""
		}
		d, err := publicsuffix.EffectiveTLDPlusOne(h)
		if err != nil {
			return ""
		}
		return d
	}
	reg := site(g.registry.RegistryStr())
	return reg != "" && site(req.URL.Host) == reg
}

// canonicalHost is host:port in lower case, the scheme's default port
// when host names none.
func canonicalHost(host, scheme string) string {
	host = strings.ToLower(host)
	if h, p, err := net.SplitHostPort(host); err == nil {
		return net.JoinHostPort(h, p)
	}
	port := "443"
	if scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}

// formCredentials reports a form body carrying a refresh token or a
// password (go-containerregistry's OAuth exchange), read from a copy of
// the body.
func formCredentials(req *http.Request) bool {
	if req.Body == nil || !strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return false
	}
	if req.GetBody == nil {
		// No way to read it and send it still: take it as carrying them.
		return true
	}
	body, err := req.GetBody()
	if err != nil {
		return true
	}
	r := req.Clone(req.Context())
	r.Body = body
	if err := r.ParseForm(); err != nil {
		return true
	}
	return r.PostForm.Get("refresh_token") != "" || r.PostForm.Get("password") != ""
}
