package ghcache

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
)

// Refresher refreshes a user's whole cached view (all the lists the user's
// cache holds), or joins a refresh of it already running, and returns when
// it is done. seen is the latest refresh of the user's lists the caller
// saw (zero: none): a refresh that finds every list refreshed after it
// fetches nothing, since another caller's refresh, in this process or
// another, did what it would do.
type Refresher func(ctx context.Context, u store.User, seen time.Time) error

// Cache reads users' GitHub views.
type Cache struct {
	Store   *store.Store
	Refresh Refresher
	// Now is the clock for ages; nil means time.Now.
	Now func() time.Time
	// RefreshTimeout bounds a shared refresh (default 10 minutes).
	RefreshTimeout time.Duration
	// BeforeWait and AfterWait, if set, are called around a read's wait on
	// a refresh: a command-line caller releases its database connections
	// before, so a hundred callers waiting on one refresh hold none of
	// them, and connects again after, waiting its turn if the server has
	// none to spare (store.ReleaseIdle, store.Connect).
	BeforeWait func()
	AfterWait  func(context.Context) error

	group singleflight.Group
}

// ErrUnknownUser is returned for a user name nobody added.
var ErrUnknownUser = errors.New("unknown user")

// ErrNoOrganization is returned for an organization asked for by name
// that GitHub does not know (a user's login, a typo): it is dropped from
// the lists the user's cache refreshes.
var ErrNoOrganization = errors.New("no organization")

// ErrRefused is returned for an organization asked for by name that
// refused the user's token (SAML single sign-on, an IP allow list) and
// never answered before: there is nothing cached to show.
var ErrRefused = errors.New("refused")

// Listing is a read's answer.
type Listing struct {
	User store.User
	// RefreshedAt is when the oldest list the answer draws on was fetched.
	RefreshedAt time.Time
	// Refreshed reports that this read fetched from GitHub (or joined a
	// fetch); RefreshErr that a refresh it asked for failed, and the answer
	// is the cache as it was.
	Refreshed  bool
	RefreshErr error
	Repos      []ghaccount.Repo
	Orgs       []ghaccount.Org
}

// Age says how old the answer is, for people.
func (l Listing) Age(now time.Time) string { return ghaccount.Age(l.RefreshedAt, now) }

// Repos answers a user's repositories that pass the filter. refresh forces
// a fetch; otherwise only a list never fetched is (the first miss).
func (c *Cache) Repos(ctx context.Context, userName string, f ghaccount.Filter, refresh bool) (Listing, error) {
	u, lists, err := c.user(ctx, userName)
	if err != nil {
		return Listing{}, err
	}
	need := []string{ghaccount.ListOrgs, ghaccount.ListRepos}
	var orgList string // the organization's view by name, when it is read
	if f.Org != "" {
		if lists[ghaccount.ListOrgs].IsZero() && !refresh {
			// Whether the organization is one of the user's is in the
			// organization list: fetch it first.
			if lists, err = c.fill(ctx, u, lists); err != nil {
				return Listing{}, err
			}
		}
		if !c.member(ctx, u.ID, f.Org) {
			orgList = ghaccount.OrgList(f.Org)
			need = append(need, orgList)
			if _, asked := lists[orgList]; !asked {
				if err := c.Store.AskList(ctx, u.ID, orgList); err != nil {
					return Listing{}, err
				}
				lists[orgList] = time.Time{}
			}
		}
	}
	out, err := c.ensure(ctx, u, lists, need, refresh)
	if err == nil && orgList != "" {
		// The organization refused the token at the last refresh: its
		// view serves what it held, if it ever held anything, and says why.
		why, rerr := c.Store.ListRefusal(ctx, u.ID, orgList)
		switch {
		case rerr != nil:
			return Listing{}, rerr
		case why != "" && out.RefreshedAt.IsZero():
			return Listing{}, fmt.Errorf("%w: %s", ErrRefused, why)
		case why != "":
			out.RefreshErr = errors.New(why)
		}
	}
	if err == nil && f.Org != "" && out.RefreshedAt.IsZero() {
		// A refresh that read the user's lists before this one asked for
		// the organization's was joined: the next one fetches it.
		out, err = c.ensure(ctx, u, nil, need, false)
	}
	if errors.Is(err, errDropped) {
		return Listing{}, fmt.Errorf("%w %s", ErrNoOrganization, f.Org)
	}
	if err != nil {
		return Listing{}, err
	}
	if out.Repos, err = c.Store.CachedRepos(ctx, u.ID, f, "", 0); err != nil {
		return Listing{}, err
	}
	return out, nil
}

// Orgs answers the organizations a user is a member of.
func (c *Cache) Orgs(ctx context.Context, userName string, refresh bool) (Listing, error) {
	u, lists, err := c.user(ctx, userName)
	if err != nil {
		return Listing{}, err
	}
	out, err := c.ensure(ctx, u, lists, []string{ghaccount.ListOrgs}, refresh)
	if err != nil {
		return Listing{}, err
	}
	if out.Orgs, err = c.Store.CachedOrgs(ctx, u.ID); err != nil {
		return Listing{}, err
	}
	return out, nil
}

// ForgetOrg drops an organization asked for by name from a user's cache:
// its repositories, pages and refusal. It reports whether the cache held it.
func (c *Cache) ForgetOrg(ctx context.Context, userName, org string) (bool, error) {
	u, _, err := c.user(ctx, userName)
	if err != nil {
		return false, err
	}
	list := ghaccount.OrgList(org)
	_, path := listEndpoint(list)
	prefix, _, _ := strings.Cut(path, "?")
	return c.Store.ForgetList(ctx, u.ID, list, prefix+"?")
}

func (c *Cache) user(ctx context.Context, name string) (store.User, map[string]time.Time, error) {
	u, err := c.Store.UserByName(ctx, name)
	if err != nil {
		return store.User{}, nil, err
	}
	if u == nil {
		return store.User{}, nil, fmt.Errorf("%w %q: add it with `starter users add %s`", ErrUnknownUser, name, name)
	}
	lists, err := c.Store.GitHubLists(ctx, u.ID)
	return *u, lists, err
}

func (c *Cache) member(ctx context.Context, userID int64, org string) bool {
	orgs, err := c.Store.CachedOrgs(ctx, userID)
	if err != nil {
		return false
	}
	for _, o := range orgs {
		if strings.EqualFold(o.Login, org) {
			return true
		}
	}
	return false
}

// errDropped: a list asked for is no longer in the user's cache after a
// refresh (the refresh found its organization does not exist).
var errDropped = errors.New("list dropped by the refresh")

// ensure refreshes when asked or when a needed list was never fetched, and
// says how old the needed lists are (lists nil: read them).
func (c *Cache) ensure(ctx context.Context, u store.User, lists map[string]time.Time, need []string, refresh bool) (Listing, error) {
	out := Listing{User: u}
	if lists == nil {
		var err error
		if lists, err = c.Store.GitHubLists(ctx, u.ID); err != nil {
			return Listing{}, err
		}
	}
	missing := false
	for _, l := range need {
		if lists[l].IsZero() {
			missing = true
		}
	}
	switch {
	case refresh:
		metrics.GitHubCacheLookups.Inc("refresh")
	case missing:
		metrics.GitHubCacheLookups.Inc("miss")
	default:
		metrics.GitHubCacheLookups.Inc("hit")
	}
	if refresh || missing {
		after, err := c.fill(ctx, u, lists)
		out.Refreshed = err == nil
		if err != nil {
			// A cache that has what was asked keeps serving through a
			// GitHub outage, as old as it was; one that never had it has
			// nothing to serve.
			if missing {
				return Listing{}, err
			}
			out.RefreshErr = err
		} else {
			lists = after
		}
	}
	for _, l := range need {
		at, ok := lists[l]
		if !ok {
			return Listing{}, errDropped
		}
		if out.RefreshedAt.IsZero() || at.Before(out.RefreshedAt) {
			out.RefreshedAt = at
		}
	}
	return out, nil
}

// fill runs (or joins) the refresh of a user's view and returns the lists
// afterwards.
func (c *Cache) fill(ctx context.Context, u store.User, seenLists map[string]time.Time) (map[string]time.Time, error) {
	timeout := c.RefreshTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	var seen time.Time
	for _, at := range seenLists {
		if at.After(seen) {
			seen = at
		}
	}
	ch := c.group.DoChan(strconv.FormatInt(u.ID, 10), func() (any, error) {
		// No caller owns the shared refresh: it outlives any one of them.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return nil, c.Refresh(rctx, u, seen)
	})
	if c.BeforeWait != nil {
		c.BeforeWait()
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.AfterWait != nil {
		if err := c.AfterWait(ctx); err != nil {
			return nil, err
		}
	}
	return c.Store.GitHubLists(ctx, u.ID)
}

// Fetch fetches the lists of an account's view, each page conditionally on
// what is stored (o.Stored; o says what else it may reuse and whom it
// tells), parses them and returns the whole view, or an error and nothing.
// It also says how many pages there were and how many came back unchanged
// (304).
//
// An organization asked for by name that GitHub does not know (404) is
// left out (View.Missing) instead of failing the refresh: one mistaken
// --org must not break every later refresh of the user. One that refuses
// the token (403: SAML single sign-on, an IP allow list) keeps its stored
// pages (View.Refused). Its repositories are ByName: the organization's
// view, not the user's list.
func Fetch(ctx context.Context, a *vcs.Account, lists []string, o vcs.ListOptions) (ghaccount.View, int, int, error) {
	var v ghaccount.View
	var own, byName [][]ghaccount.Repo
	pages, unchanged := 0, 0
	for _, list := range lists {
		endpoint, path := listEndpoint(list)
		org := ghaccount.OrgOfList(list)
		if org != "" && slices.ContainsFunc(v.Orgs, func(o ghaccount.Org) bool { return strings.EqualFold(o.Login, org) }) {
			// The user joined it (the organizations are fetched first):
			// the user's own list holds what it can read there, and the
			// view by name would cost requests for nothing.
			v.Joined = append(v.Joined, list)
			continue
		}
		ps, n, err := a.FetchList(ctx, endpoint, path, o)
		if c := errclass.Classify(err); org != "" && c != nil && c.Class == errclass.Permanent && c.Reason == errclass.ReasonNotFound {
			v.Missing = append(v.Missing, list)
			continue
		}
		if msg, forbidden := vcs.Forbidden(err); org != "" && forbidden {
			// Refused alone: the view keeps what the organization's list
			// held, and the user's own lists refresh.
			v.Refused = append(v.Refused, ghaccount.Refusal{List: list, Reason: ghaccount.RefusalReason(org, msg)})
			ps = vcs.StoredList(path, o.Stored)
		} else if err != nil {
			if org != "" {
				return ghaccount.View{}, 0, 0, fmt.Errorf("organization %s: %w", org, err)
			}
			return ghaccount.View{}, 0, 0, err
		} else {
			v.Lists = append(v.Lists, list)
			pages, unchanged = pages+len(ps), unchanged+n
		}
		v.Pages = append(v.Pages, ps...)
		for _, p := range ps {
			if list == ghaccount.ListOrgs {
				orgs, err := vcs.ParseOrgs(p)
				if err != nil {
					return ghaccount.View{}, 0, 0, err
				}
				v.Orgs = append(v.Orgs, orgs...)
				continue
			}
			repos, err := vcs.ParseRepos(p)
			if err != nil {
				return ghaccount.View{}, 0, 0, err
			}
			if org == "" {
				own = append(own, repos)
				continue
			}
			for i := range repos {
				repos[i].ByName = true
			}
			byName = append(byName, repos)
		}
	}
	// Merge keeps a repository's first occurrence: the user's own lists
	// first, so one that is both the user's and an asked organization's
	// stays in the user's list.
	v.Repos = ghaccount.Merge(append(own, byName...)...)
	return v, pages, unchanged, nil
}

// listEndpoint maps a list to its endpoint pattern and first page.
func listEndpoint(list string) (endpoint, path string) {
	switch list {
	case ghaccount.ListOrgs:
		return "/user/orgs", "user/orgs"
	case ghaccount.ListRepos:
		return "/user/repos", "user/repos?affiliation=owner,collaborator,organization_member&sort=full_name"
	}
	return "/orgs/{org}/repos", "orgs/" + url.PathEscape(ghaccount.OrgOfList(list)) + "/repos?type=all&sort=full_name"
}
