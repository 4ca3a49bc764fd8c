package ocistore

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"gitfleet/internal/infra/errclass"
)

// KeepCredentials returns base guarded so that what authenticates a
// client to registry — the peer token, the keychain's credentials for
// that registry — reaches that registry's own host and port only.
//
// go-containerregistry sends them elsewhere in one case: a registry that
// answers with a Bearer challenge names the token service ("realm") the
// client then gives its credentials to, and the realm may be any public
// host. So a registry, or a peer, could have them sent to a host of its
// choosing. Through this guard a request to any other host goes without
// an Authorization header — a token service on another host is asked
// anonymously, which is enough for public images — and one carrying a
// refresh token or a password in its form (the OAuth exchange) is not
// sent at all. The one exception is Docker Hub, whose registry
// (index.docker.io) has always had its token service on auth.docker.io,
// over https.
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

// own reports a request to the registry's host and port (its scheme's
// default port when it names none), or Docker Hub's token service for
// Docker Hub.
func (g *credentialGuard) own(req *http.Request) bool {
	scheme := strings.ToLower(req.URL.Scheme)
	host := canonicalHost(req.URL.Host, scheme)
	if host == canonicalHost(g.registry.RegistryStr(), scheme) {
		return true
	}
	return g.registry.RegistryStr() == name.DefaultRegistry && scheme == "https" && host == "auth.docker.io:443"
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
