package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/ghcache"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// An organization asked for by name that is none (a user's login) answers
// "no organization" for that call and never breaks the user's later
// refreshes; a cache an older version left asking for one repairs itself.
// An organization asked for by a non-member is a view of its own: the
// user's list keeps what /user/repos gives.
func TestGitHubCacheOrganizationsAskedByName(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	bob, alice := addGitHubUser(t, o+"-bob"), addGitHubUser(t, o+"-alice")
	org := o + "-acme"
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"api", "site"} {
		createRepo(t, org, n)
	}
	createRepo(t, bob.gh.Login, "dots")
	c := ghCache()

	_, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: alice.gh.Login}, false)
	if !errors.Is(err, ghcache.ErrNoOrganization) || err.Error() != "no organization "+alice.gh.Login {
		t.Fatalf("--org %s (a user): %v, want \"no organization %s\"", alice.gh.Login, err, alice.gh.Login)
	}
	assertLists(t, bob.ID, ghaccount.ListOrgs, ghaccount.ListRepos)
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{}, true); err != nil || l.RefreshErr != nil || names(l.Repos) != bob.gh.Login+"/dots" {
		t.Fatalf("refresh after a missing organization: %q, %v / %v", names(l.Repos), err, l.RefreshErr)
	}
	// A cache left asking for it (before this fix) refreshes, and drops it.
	if err := env.Store.AskList(ctx, bob.ID, ghaccount.OrgList(alice.gh.Login)); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{}, true); err != nil || l.RefreshErr != nil {
		t.Fatalf("refresh of a cache asking for a missing organization: %v / %v", err, l.RefreshErr)
	}
	assertLists(t, bob.ID, ghaccount.ListOrgs, ghaccount.ListRepos)

	// The organization's view, asked for by name, and bob's own list.
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: org}, false); err != nil || names(l.Repos) != fmt.Sprintf("%s/api %s/site", org, org) {
		t.Fatalf("--org %s: %q, %v", org, names(l.Repos), err)
	}
	for _, refresh := range []bool{false, true} {
		if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{}, refresh); err != nil || names(l.Repos) != bob.gh.Login+"/dots" {
			t.Fatalf("bob's list (refresh %t) after asking for %s: %q, %v", refresh, org, names(l.Repos), err)
		}
	}
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: org}, false); err != nil || l.Refreshed || len(l.Repos) != 2 {
		t.Fatalf("--org %s again: %+v, %v; want the cached view", org, l, err)
	}
}

func assertLists(t *testing.T, userID int64, want ...string) {
	t.Helper()
	lists, err := env.Store.GitHubLists(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	if len(lists) != len(want) {
		t.Fatalf("the user's cache holds lists %v, want %v", lists, want)
	}
	for _, l := range want {
		if _, ok := lists[l]; !ok {
			t.Fatalf("the user's cache holds lists %v, want %v", lists, want)
		}
	}
}

// A hundred cold callers in as many processes (caches of their own, with
// nothing shared but Temporal and the database) make one refresh, also
// those that found the cache cold but asked only after the first refresh
// had ended.
func TestGitHubCacheColdCallersAcrossProcessesMakeOneRefresh(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	u := addGitHubUser(t, o+"-cold")
	createRepo(t, u.gh.Login, "app")
	mark := len(fg.Requests())
	firstDone := make(chan struct{})
	var once sync.Once
	const callers = 100
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		late := i%2 == 1
		// Each caller a process of its own: its own cache, so no
		// in-process sharing of the refresh.
		c := &ghcache.Cache{Store: env.Store, Refresh: func(ctx context.Context, u store.User, seen time.Time) error {
			if late { // looked before the first refresh ended, asks after
				<-firstDone
			}
			_, err := workflows.JoinGitHubCacheRefresh(ctx, env.Client, u.Name, u.ID, seen)
			if !late {
				once.Do(func() { close(firstDone) })
			}
			return err
		}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Repos(ctx, u.Name, ghaccount.Filter{}, false)
			if err == nil && len(l.Repos) != 1 {
				err = fmt.Errorf("%d repositories", len(l.Repos))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, m := apiCalls(mark, "user/repos"), apiCalls(mark, "user/orgs"); n != 1 || m != 1 {
		t.Fatalf("%d cold callers made %d /user/repos and %d /user/orgs requests, want one refresh", callers, n, m)
	}
}

// An organization asked for by name that refuses the token (SAML single
// sign-on, an IP allow list: GitHub's 403) fails alone: the user's own
// refresh goes on, the organization's view serves what it held and says
// why, one never answered says why and serves nothing, and the refusal
// clears once the organization answers. An organization the user joins
// stops being asked for by name; forget-org drops one.
func TestGitHubCacheRefusedOrganization(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	bob := addGitHubUser(t, o+"-bob")
	createRepo(t, bob.gh.Login, "dots")
	sso, ipo, never, joined := o+"-sso", o+"-ip", o+"-never", o+"-joined"
	for _, org := range []string{sso, ipo, never, joined} {
		if err := fg.CreateOrg(org); err != nil {
			t.Fatal(err)
		}
		createRepo(t, org, "api")
	}
	c := ghCache()
	for _, org := range []string{sso, ipo, joined} {
		if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: org}, false); err != nil || len(l.Repos) != 1 {
			t.Fatalf("--org %s: %q, %v", org, names(l.Repos), err)
		}
	}
	defer fg.EnforceSAML(sso)()
	defer fg.EnforceIPAllowList(ipo)()
	lift := fg.EnforceSAML(never)

	mine := bob.gh.Login + "/dots"
	own := func(what string) {
		t.Helper()
		if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{}, true); err != nil || l.RefreshErr != nil || names(l.Repos) != mine {
			t.Fatalf("bob's refresh %s: %q, %v / %v", what, names(l.Repos), err, l.RefreshErr)
		}
	}
	own("with two organizations refusing")
	for _, tc := range []struct{ org, why string }{
		{sso, sso + " enforces SAML single sign-on: authorize the token for the organization"},
		{ipo, ipo + " has an IP allow list that does not admit this worker's address"},
	} {
		l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: tc.org}, tc.org == sso)
		if err != nil || names(l.Repos) != tc.org+"/api" || l.RefreshErr == nil || !strings.HasPrefix(l.RefreshErr.Error(), tc.why) {
			t.Errorf("--org %s refused: %q, %v / %v; want its cached view and %q", tc.org, names(l.Repos), err, l.RefreshErr, tc.why)
		}
	}
	if _, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: never}, false); !errors.Is(err, ghcache.ErrRefused) ||
		!strings.Contains(err.Error(), never+" enforces SAML single sign-on") {
		t.Errorf("--org %s, refused before it ever answered: %v", never, err)
	}
	own("with a refused organization never answered")

	// Joined: the view by name is dropped at the next refresh.
	if err := fg.AddMember(joined, bob.gh.Login); err != nil {
		t.Fatal(err)
	}
	mine += " " + joined + "/api" // now in bob's own list
	own("after joining " + joined)
	// Forgotten: dropped now.
	if ok, err := c.ForgetOrg(ctx, bob.Name, sso); err != nil || !ok {
		t.Fatalf("forget %s: %t, %v", sso, ok, err)
	}
	if ok, err := c.ForgetOrg(ctx, bob.Name, sso); err != nil || ok {
		t.Fatalf("forget %s again: %t, %v; want nothing to forget", sso, ok, err)
	}
	mark := len(fg.Requests())
	own("after forgetting " + sso)
	for _, org := range []string{joined, sso} {
		if n := apiCalls(mark, "orgs/"+org+"/repos"); n != 0 {
			t.Errorf("%d requests for %s's repositories by name, want none", n, org)
		}
	}
	assertLists(t, bob.ID, ghaccount.ListOrgs, ghaccount.ListRepos, ghaccount.OrgList(ipo), ghaccount.OrgList(never))

	lift()
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: never}, true); err != nil || l.RefreshErr != nil || names(l.Repos) != never+"/api" {
		t.Errorf("--org %s once it answers: %q, %v / %v", never, names(l.Repos), err, l.RefreshErr)
	}
}

// A hundred callers, each with a pool of its own as a starter process
// has, waiting on one slow refresh hold none of PostgreSQL's connections
// while they wait, so none is refused under the server's default
// max_connections (100; issue 35: 84 open at once, 5 of 100 refused).
func TestGitHubCacheWaitingCallersHoldNoConnection(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	u := addGitHubUser(t, o+"-busy")
	createRepo(t, u.gh.Login, "app")
	// The refresh's first request waits until every caller waits on it.
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce() // a failure part way must not leave the refresh hanging
	defer fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/user/orgs", Times: 1, Before: func(*http.Request) { <-release }})()
	clientConns := func() int {
		var n int
		if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := clientConns()
	const callers = 100
	errs := make(chan error, callers)
	for range callers {
		st, err := store.Open(ctx, env.DatabaseURL, store.MaxConns(2)) // as the starter opens it
		if err != nil {
			t.Fatal(err)
		}
		waiting := make(chan struct{})
		c := &ghcache.Cache{Store: st, BeforeWait: func() { st.ReleaseIdle(); close(waiting) }, AfterWait: st.Connect,
			Refresh: func(ctx context.Context, u store.User, seen time.Time) error {
				_, err := workflows.JoinGitHubCacheRefresh(ctx, env.Client, u.Name, u.ID, seen)
				return err
			}}
		go func() {
			defer st.Close() // the process exits
			l, err := c.Repos(ctx, u.Name, ghaccount.Filter{}, false)
			if err == nil && len(l.Repos) != 1 {
				err = fmt.Errorf("%d repositories", len(l.Repos))
			}
			errs <- err
		}()
		<-waiting
	}
	if n := clientConns() - before; n > 5 {
		t.Errorf("%d callers waiting on one refresh hold %d connections, want none of their own", callers, n)
	}
	releaseOnce()
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
