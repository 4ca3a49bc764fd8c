package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/ghcache"
	"gitfleet/internal/infra/secrets"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// GitHub are the GitHub cache activities (architecture §6). Workflows name users
// by id; the token is read sealed from the database and opened here, so it
// never travels through Temporal.
type GitHub struct {
	Store *store.Store
	// Box opens users' tokens; nil means no GITFLEET_TOKEN_KEY was given,
	// and refreshes fail saying so.
	Box   *secrets.Box
	Hosts vcs.Hosts
	// HTTPClient may be nil; MaxConcurrent bounds each token's requests in
	// flight (default 10).
	HTTPClient    *http.Client
	MaxConcurrent int
	Log           *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (g *GitHub) now() time.Time {
	if g.Now != nil {
		return g.Now().UTC()
	}
	return time.Now().UTC()
}

// account opens a user's token and returns a client acting as the user,
// and the token as sealed (which token a refusal is of).
func (g *GitHub) account(ctx context.Context, u store.User) (*vcs.Account, []byte, error) {
	if g.Box == nil {
		return nil, nil, errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, secrets.ErrNoKey)
	}
	host, ok := g.Hosts.ByAPIURL(u.APIURL)
	if !ok {
		return nil, nil, errclass.Permanentf(errclass.ReasonInvalidInput, "user %s belongs to %s, which this worker is not configured for", u.Name, u.APIURL)
	}
	sealed, err := g.Store.SealedToken(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	token, err := g.Box.Open(sealed, store.TokenContext(u.Name))
	if err != nil {
		return nil, nil, errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, fmt.Errorf("the token of user %s: %w", u.Name, err))
	}
	a, err := vcs.NewAccount(host, string(token), vcs.AccountOptions{HTTPClient: g.HTTPClient, MaxConcurrent: g.MaxConcurrent, Now: g.Now})
	return a, sealed, err
}

// tokenRefused is the error of a refresh of a user whose token GitHub
// refused (401): Permanent, saying when and what to do.
func tokenRefused(u store.User) error {
	return errclass.Permanentf(errclass.ReasonPermissionDenied, "%s", ghaccount.TokenRefused(u.Name, *u.TokenRefusedAt))
}

// refuseToken records GitHub's 401 for the token a refresh used, so that
// later refreshes fail at once instead of asking GitHub again (and users
// list shows it). A token replaced while the refresh ran is not marked:
// the refresh's own error stands.
func (g *GitHub) refuseToken(ctx context.Context, u store.User, sealed []byte, cause error) error {
	now, err := g.Store.RefuseToken(ctx, u.ID, sealed, vcs.ErrTokenRejected.Error(), g.now())
	if err != nil {
		return err
	}
	if now == nil || now.TokenRefusedAt == nil {
		return cause
	}
	return tokenRefused(*now)
}

func (g *GitHub) user(ctx context.Context, id int64) (store.User, error) {
	u, err := g.Store.UserByID(ctx, id)
	if err != nil {
		return store.User{}, err
	}
	if u == nil {
		return store.User{}, errclass.Permanentf(errclass.ReasonNotFound, "user %d does not exist", id)
	}
	return *u, nil
}

// RefreshGitHubCache fetches every list a user's cache holds and replaces
// the cached view whole; any failure leaves it as it was.
func (g *GitHub) RefreshGitHubCache(ctx context.Context, in workflows.RefreshGitHubCacheInput) (workflows.RefreshGitHubCacheResult, error) {
	u, err := g.user(ctx, in.UserID)
	if err != nil {
		return workflows.RefreshGitHubCacheResult{}, AppError(err)
	}
	if u.TokenRefusedAt != nil {
		// Asking GitHub again would get the same 401: not a request
		// until the token is replaced (store.PutUser clears the mark).
		return workflows.RefreshGitHubCacheResult{}, AppError(tokenRefused(u))
	}
	account, sealed, err := g.account(ctx, u)
	if err != nil {
		return workflows.RefreshGitHubCacheResult{}, AppError(err)
	}
	lists, err := g.Store.GitHubLists(ctx, u.ID)
	if err != nil {
		return workflows.RefreshGitHubCacheResult{}, AppError(err)
	}
	if in.OnlyIfStale && refreshedSince(lists, in.SeenAt) {
		return workflows.RefreshGitHubCacheResult{Skipped: true}, nil
	}
	want := []string{ghaccount.ListOrgs, ghaccount.ListRepos}
	for l := range lists {
		if ghaccount.OrgOfList(l) != "" {
			want = append(want, l)
		}
	}
	slices.Sort(want[2:]) // the same order every time: the same requests
	stored, err := g.Store.GitHubPages(ctx, u.ID)
	if err != nil {
		return workflows.RefreshGitHubCacheResult{}, AppError(err)
	}
	// Each page is saved as it comes and heartbeated: a retry after this
	// attempt died (the worker killed, cut off) takes the pages it saved
	// without asking again, and starts within the heartbeat timeout.
	var progress RefreshProgress
	opts := vcs.ListOptions{Stored: stored}
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &progress) == nil && !progress.Started.IsZero() {
		opts.FreshSince = progress.Started
	} else {
		progress = RefreshProgress{Started: g.now()}
	}
	activity.RecordHeartbeat(ctx, progress)
	opts.Fetched = func(p ghaccount.Page) error {
		if err := g.Store.SaveGitHubPage(ctx, u.ID, p); err != nil {
			return err
		}
		progress.Pages++
		activity.RecordHeartbeat(ctx, progress)
		return nil
	}
	view, pages, unchanged, err := ghcache.Fetch(ctx, account, want, opts)
	if errors.Is(err, vcs.ErrTokenRejected) {
		err = g.refuseToken(ctx, u, sealed, err)
	}
	if err != nil {
		return workflows.RefreshGitHubCacheResult{}, AppError(err)
	}
	if err := g.Store.ReplaceGitHubView(ctx, u.ID, u.APIURL, view, g.now()); err != nil {
		return workflows.RefreshGitHubCacheResult{}, AppError(err)
	}
	out := workflows.RefreshGitHubCacheResult{Pages: pages, NotModified: unchanged, Orgs: len(view.Orgs), Repos: len(view.Repos)}
	for _, l := range view.Missing {
		out.MissingOrgs = append(out.MissingOrgs, ghaccount.OrgOfList(l))
	}
	for _, r := range view.Refused {
		out.RefusedOrgs = append(out.RefusedOrgs, ghaccount.OrgOfList(r.List))
	}
	g.logger(ctx).Info("github cache refreshed", zap.Int64("user", u.ID), zap.Int("pages", out.Pages),
		zap.Int("notModified", out.NotModified), zap.Int("orgs", out.Orgs), zap.Int("repos", out.Repos))
	return out, nil
}

// RefreshProgress is RefreshGitHubCache's heartbeat: when the refresh's
// first attempt started (the pages saved since are this refresh's) and
// how many pages it fetched.
type RefreshProgress struct {
	Started time.Time `json:"started"`
	Pages   int       `json:"pages"`
}

// refreshedSince reports whether the user's cache holds its lists, each
// refreshed after seen: a refresh that ended after its caller looked.
func refreshedSince(lists map[string]time.Time, seen time.Time) bool {
	for _, l := range []string{ghaccount.ListOrgs, ghaccount.ListRepos} {
		if _, ok := lists[l]; !ok {
			return false
		}
	}
	for _, at := range lists {
		if !at.After(seen) { // a list never fetched is the zero time
			return false
		}
	}
	return true
}

// ListCachedRepos returns a page of a user's cached repositories of an
// organization, as repository names of the user's host.
func (g *GitHub) ListCachedRepos(ctx context.Context, in workflows.ListCachedReposInput) (workflows.CachedReposPage, error) {
	u, err := g.user(ctx, in.UserID)
	if err != nil {
		return workflows.CachedReposPage{}, AppError(err)
	}
	host, ok := g.Hosts.ByAPIURL(u.APIURL)
	if !ok {
		return workflows.CachedReposPage{}, AppError(errclass.Permanentf(errclass.ReasonInvalidInput,
			"user %s belongs to %s, which this worker is not configured for", u.Name, u.APIURL))
	}
	repos, err := g.Store.CachedRepos(ctx, u.ID, ghaccount.Filter{Org: in.Org, IncludeArchived: in.IncludeArchived}, in.After, in.Limit)
	if err != nil {
		return workflows.CachedReposPage{}, AppError(err)
	}
	out := workflows.CachedReposPage{Done: len(repos) < in.Limit}
	for _, r := range repos {
		out.Repos = append(out.Repos, repoid.ID{Host: host.Name, Owner: r.Owner, Name: r.Name})
		out.Next = strings.ToLower(r.FullName())
	}
	return out, nil
}

func (g *GitHub) logger(ctx context.Context) *zap.Logger {
	return activityLogger(ctx, g.Log)
}
