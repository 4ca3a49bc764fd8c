package vcs

import (
	"context"
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
}

// NewGitHub returns a Directory for h. httpClient may be nil.
func NewGitHub(h Host, httpClient *http.Client) (*GitHub, error) {
	c, err := newClient(h, h.Token, httpClient)
	if err != nil {
		return nil, err
	}
	return &GitHub{client: c}, nil
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
