package vcs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/go-github/v66/github"

	"gitfleet/internal/domain/identity"
	"gitfleet/internal/infra/errclass"
)

// GitHub is a Directory backed by the GitHub REST API (github.com or GitHub
// Enterprise Server).
type GitHub struct {
	client *github.Client
	authed bool // requests carry the host's token
}

// NewGitHub returns a Directory for h. httpClient may be nil.
func NewGitHub(h Host, httpClient *http.Client) (*GitHub, error) {
	c, err := newClient(h, h.Token, httpClient)
	if err != nil {
		return nil, err
	}
	return &GitHub{client: c, authed: h.Token != ""}, nil
}

// Client exposes the underlying go-github client for other lookups.
func (g *GitHub) Client() *github.Client { return g.client }

// Repository looks owner/name up. go-github follows GitHub's 301 for renamed
// and transferred repositories, so the answer carries the current name.
func (g *GitHub) Repository(ctx context.Context, owner, name string) (identity.Repository, error) {
	r, _, err := g.client.Repositories.Get(ctx, owner, name)
	if err != nil {
		return identity.Repository{}, fmt.Errorf("look up %s/%s: %w", owner, name, err)
	}
	if r.ID == nil || r.Owner == nil {
		return identity.Repository{}, fmt.Errorf("look up %s/%s: response has no id or owner", owner, name)
	}
	return repository(r), nil
}

// RepositoryByID looks a repository up by id (GET /repositories/{id}),
// which follows renames and transfers without redirects.
func (g *GitHub) RepositoryByID(ctx context.Context, externalID string) (identity.Repository, error) {
	id, err := strconv.ParseInt(externalID, 10, 64)
	if err != nil {
		return identity.Repository{}, errclass.Permanentf(errclass.ReasonInvalidInput, "repository id %q is not a number", externalID)
	}
	r, _, err := g.client.Repositories.GetByID(ctx, id)
	if err != nil {
		return identity.Repository{}, fmt.Errorf("look up repository %d: %w", id, err)
	}
	if r.ID == nil || r.Owner == nil {
		return identity.Repository{}, fmt.Errorf("look up repository %d: response has no id or owner", id)
	}
	return repository(r), nil
}

// ProvesGone reports whether the token is a site administrator's, which
// sees every repository of the host: its 404 for an id is proof that the
// repository was deleted. An owner's or a member's token is not: a
// repository transferred to an account its user cannot see answers it 404
// as a deleted one does. Without a token it proves nothing.
func (g *GitHub) ProvesGone(ctx context.Context) (bool, error) {
	if !g.authed {
		return false, nil
	}
	me, _, err := g.client.Users.Get(ctx, "")
	if err != nil {
		return false, fmt.Errorf("who is the token: %w", err)
	}
	return me.GetSiteAdmin(), nil
}

// Unauthorized reports the API's 401: it refused the token itself
// (expired, revoked, mistyped), which says nothing of the repository asked
// for.
func Unauthorized(err error) bool {
	var gh *github.ErrorResponse
	return errors.As(err, &gh) && gh.Response != nil && gh.Response.StatusCode == http.StatusUnauthorized
}

func repository(r *github.Repository) identity.Repository {
	return identity.Repository{
		ExternalID:    strconv.FormatInt(r.GetID(), 10),
		Owner:         r.GetOwner().GetLogin(),
		Name:          r.GetName(),
		DefaultBranch: r.GetDefaultBranch(),
		Private:       r.GetPrivate(),
		CreatedAt:     r.GetCreatedAt().Time,
	}
}
