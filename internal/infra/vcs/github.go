package vcs

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

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

// SeesOwner reports whether the token sees every repository of owner: its
// user is the owner, an active member of the owning organization (GET
// /user/memberships/orgs/{org}), or a site administrator. Without a token it
// sees no private repository at all. A member of an organization whose base
// permission is "none" may not see a private repository that a team keeps
// from it: gitfleet takes membership for sight, as GitHub's default base
// permission (read) gives it.
func (g *GitHub) SeesOwner(ctx context.Context, owner string) (bool, error) {
	if !g.authed {
		return false, nil
	}
	me, _, err := g.client.Users.Get(ctx, "")
	if err != nil {
		return false, fmt.Errorf("who is the token: %w", err)
	}
	if strings.EqualFold(me.GetLogin(), owner) || me.GetSiteAdmin() {
		return true, nil
	}
	m, resp, err := g.client.Organizations.GetOrgMembership(ctx, "", owner)
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden) {
			return false, nil // not a member (or owner is a user)
		}
		return false, fmt.Errorf("membership of %s: %w", owner, err)
	}
	return m.GetState() == "active", nil
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
