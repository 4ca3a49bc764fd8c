package mirror

import (
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport/client"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/reach"
)

// Where a fetch may go is reach's policy (GITFLEET_ALLOWED_HOSTS): the
// probe's client and go-git's transport dial through reach.DialContext and
// check each request's host before it is sent, redirects included. A
// remote is an http(s) URL: go-git's other transports (file, ssh, git)
// are removed from its process-wide table, so that no URL a request
// names opens a path on the worker's disk or dials past the policy.

func init() {
	for _, scheme := range []string{"file", "ssh", "git"} {
		client.InstallProtocol(scheme, nil)
	}
}

// checkRemote refuses, before anything is sent, a remote that is not an
// http(s) URL on a host the policy allows: Permanent.
func checkRemote(remoteURL string) error {
	u, err := url.Parse(remoteURL)
	if err != nil || u.Host == "" {
		return errclass.Permanentf(errclass.ReasonInvalidInput, "not a repository URL")
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return errclass.Permanentf(errclass.ReasonInvalidInput, "unsupported URL scheme %q: use https", u.Scheme)
	}
	return reach.Current().CheckHost(u.Hostname())
}
