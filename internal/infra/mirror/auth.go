package mirror

import (
	"context"
	"errors"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"gitfleet/internal/infra/errclass"
)

// Credentials gives the token a Git request to a remote authenticates
// with (gitcreds.Set: a GitHub App's installation token, or a configured
// one). The token travels in the request's Authorization header only
// (HTTP Basic, user x-access-token, as GitHub documents it for
// installation tokens): never in a URL, the mirror's config on disk, or a
// process argument. Redirects keep it only within the origin asked
// (checkRedirect), so it never reaches another host.
type Credentials interface {
	// GitToken returns the token for remoteURL, "" to read anonymously.
	GitToken(ctx context.Context, remoteURL string) (string, error)
	// GitTokenRefused tells that the remote refused token (401): an
	// installation token that expired early or was revoked. The next
	// GitToken must not return it.
	GitTokenRefused(remoteURL, token string)
}

// SetCredentials makes every request of these mirrors to a remote
// authenticate with c (nil: anonymously). Call it before the mirrors are
// used.
func (m *Mirrors) SetCredentials(c Credentials) { m.creds = c }

// authed runs op with the credentials for remoteURL (nil auth: anonymous).
// When the remote refuses the token, the source forgets it and op runs once
// more with the one it gives next, so a token that expired mid-collection
// is renewed rather than taken for a private repository.
func authed(ctx context.Context, c Credentials, remoteURL string, op func(auth *githttp.BasicAuth) error) error {
	if c == nil {
		return op(nil)
	}
	tok, err := c.GitToken(ctx, remoteURL)
	if err != nil {
		return err
	}
	err = op(basicAuth(tok))
	if tok == "" || !refusedCredentials(err) {
		return err
	}
	c.GitTokenRefused(remoteURL, tok)
	again, terr := c.GitToken(ctx, remoteURL)
	if terr != nil || again == tok {
		return errors.Join(err, terr)
	}
	return op(basicAuth(again))
}

func basicAuth(token string) *githttp.BasicAuth {
	if token == "" {
		return nil
	}
	return &githttp.BasicAuth{Username: "x-access-token", Password: token}
}

// method is auth as go-git's option (a nil interface for none).
func method(auth *githttp.BasicAuth) transport.AuthMethod {
	if auth == nil {
		return nil
	}
	return auth
}

// refusedCredentials reports a remote that refused the credentials (401).
func refusedCredentials(err error) bool {
	return err != nil && errors.Is(err, transport.ErrAuthenticationRequired)
}

// ListRefs lists the remote's refs (git ls-remote), without cloning,
// anonymously.
func ListRefs(ctx context.Context, remoteURL string) ([]*plumbing.Reference, error) {
	return listRefs(ctx, remoteURL, nil)
}

// ListRefsWith is ListRefs authenticated with c (the sweep's change check
// of a private repository).
func ListRefsWith(ctx context.Context, remoteURL string, c Credentials) ([]*plumbing.Reference, error) {
	var refs []*plumbing.Reference
	err := authed(ctx, c, remoteURL, func(auth *githttp.BasicAuth) error {
		var err error
		refs, err = listRefs(ctx, remoteURL, auth)
		return err
	})
	return refs, err
}

// Sync brings the mirror of remoteURL up to date with the remote's branches
// and tags (pruning deleted ones) and reports what HEAD points at.
func (m *Mirrors) Sync(ctx context.Context, remoteURL string) (Remote, error) {
	var out Remote
	err := authed(ctx, m.creds, remoteURL, func(auth *githttp.BasicAuth) error {
		var err error
		out, err = m.sync(ctx, remoteURL, auth)
		return err
	})
	return out, err
}

// FetchSnapshotWith is FetchSnapshot authenticated with c: a runner's
// build of a private repository's commit.
func FetchSnapshotWith(ctx context.Context, remoteURL, sha, dir string, c Credentials) (*git.Repository, bool, error) {
	if c == nil {
		return FetchSnapshot(ctx, remoteURL, sha, dir)
	}
	if !plumbing.IsHash(sha) {
		return nil, false, errclass.Permanentf(errclass.ReasonInvalidInput, "%q is not a commit id", sha)
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return nil, false, err
	}
	var ok bool
	err = authed(ctx, c, remoteURL, func(auth *githttp.BasicAuth) error {
		var err error
		ok, err = fetchSHA(ctx, repo, dir, remoteURL, sha, "refs/gitfleet/snapshot", 1, auth)
		return err
	})
	return repo, ok, err
}
