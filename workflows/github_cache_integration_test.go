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

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/ghcache"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// ghUser is a forge user added to gitfleet, with its token sealed.
type ghUser struct {
	gh forge.User
	store.User
}

func addGitHubUser(t testing.TB, login string) ghUser {
	t.Helper()
	fu, err := fg.AddUser(login)
	if err != nil {
		t.Fatal(err)
	}
	u, err := env.Store.PutUser(context.Background(), store.NewUser{Name: login, APIURL: fg.APIURL(), Login: fu.Login,
		GitHubID: fu.ID, TokenSealed: tokenBox.Seal([]byte(fu.Token), store.TokenContext(login))})
	if err != nil {
		t.Fatal(err)
	}
	return ghUser{gh: fu, User: u}
}

func ghCache() *ghcache.Cache {
	return &ghcache.Cache{Store: env.Store, Refresh: func(ctx context.Context, u store.User, seen time.Time) error {
		_, err := workflows.JoinGitHubCacheRefresh(ctx, env.Client, u.Name, u.ID, seen)
		return err
	}}
}

// apiCalls counts the forge's API requests to a path since a point of the
// request log.
func apiCalls(since int, path string) int {
	n := 0
	for _, r := range fg.Requests()[since:] {
		if r.Kind == forge.API && r.Path == "/api/v3/"+path {
			n++
		}
	}
	return n
}

func names(rs []ghaccount.Repo) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.FullName())
	}
	return strings.Join(out, " ")
}

// Cold miss → refresh → hit; an unchanged account refreshes with 304s
// only and spends no quota; what the user lost upstream is gone after one
// refresh; two users see the same organization differently; the tokens
// appear in no history and no log.
func TestGitHubCache(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	org := o + "-org"
	alice, bob := addGitHubUser(t, o+"-alice"), addGitHubUser(t, o+"-bob")
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{alice.gh.Login, bob.gh.Login} {
		if err := fg.AddMember(org, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"api", "secret", "site"} {
		createRepo(t, org, n)
	}
	createRepo(t, alice.gh.Login, "dots")
	if err := fg.SetPrivate(org, "secret", true); err != nil {
		t.Fatal(err)
	}
	if err := fg.SetRepoAccess(org, "secret", alice.gh.Login); err != nil {
		t.Fatal(err)
	}
	c := ghCache()

	// Cold: one refresh, as a workflow.
	l, err := c.Repos(ctx, alice.Name, ghaccount.Filter{}, false)
	want := fmt.Sprintf("%s/dots %s/api %s/secret %s/site", alice.gh.Login, org, org, org)
	if err != nil || !l.Refreshed || names(l.Repos) != want {
		t.Fatalf("cold read: %q (refreshed %t), %v; want %q", names(l.Repos), l.Refreshed, err, want)
	}
	if r := l.Repos[1]; r.Source != ghaccount.Organization || r.Visibility != "public" || r.DefaultBranch != "main" {
		t.Fatalf("%s = %+v", r.FullName(), r)
	}
	// Warm: a hit, no API request.
	mark := len(fg.Requests())
	if l, err := c.Repos(ctx, alice.Name, ghaccount.Filter{Org: org}, false); err != nil || l.Refreshed || len(l.Repos) != 3 {
		t.Fatalf("warm read: %+v, %v", l, err)
	}
	if n := apiCalls(mark, "user/repos") + apiCalls(mark, "user/orgs"); n != 0 {
		t.Fatalf("a cache hit made %d API requests", n)
	}
	// Bob shares the organization, not the restricted repository.
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{Org: org}, false); err != nil || names(l.Repos) != fmt.Sprintf("%s/api %s/site", org, org) {
		t.Fatalf("bob's view: %q, %v", names(l.Repos), err)
	}

	// Unchanged account: every page 304, no quota spent.
	before := fg.RateRemaining(alice.gh.Token)
	res, err := workflows.RunGitHubCacheRefresh(ctx, env.Client, alice.Name, alice.ID)
	if err != nil || res.Pages == 0 || res.NotModified != res.Pages {
		t.Fatalf("refresh of an unchanged account: %+v, %v", res, err)
	}
	recordHistory(t, "refresh-github-cache", workflows.GitHubCacheRefreshWorkflowID(alice.Name), "")
	if after := fg.RateRemaining(alice.gh.Token); after != before {
		t.Fatalf("an unchanged refresh spent quota: %d → %d", before, after)
	}

	// A repository deleted and a membership revoked upstream are gone
	// after one refresh.
	if err := fg.Delete(alice.gh.Login, "dots"); err != nil {
		t.Fatal(err)
	}
	if err := fg.RemoveMember(org, alice.gh.Login); err != nil {
		t.Fatal(err)
	}
	l, err = c.Repos(ctx, alice.Name, ghaccount.Filter{}, true)
	if err != nil || l.RefreshErr != nil {
		t.Fatalf("refresh: %v / %v", err, l.RefreshErr)
	}
	// Public repositories of an organization one is not a member of come
	// from the organization's own list; the restricted one stays visible
	// as a collaborator.
	if got := names(l.Repos); got != fmt.Sprintf("%s/secret", org) {
		t.Fatalf("after the refresh alice has %q", got)
	}
	if orgs, err := c.Orgs(ctx, alice.Name, false); err != nil || len(orgs.Orgs) != 0 {
		t.Fatalf("alice's organizations after leaving: %+v, %v", orgs.Orgs, err)
	}

	// The tokens are in no workflow history and no worker log.
	for _, u := range []ghUser{alice, bob} {
		events := 0
		it := env.Client.GetWorkflowHistory(ctx, workflows.GitHubCacheRefreshWorkflowID(u.Name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if strings.Contains(e.String(), u.gh.Token) {
				t.Fatalf("the history of %s's refresh holds the token in event %d", u.Name, e.GetEventId())
			}
		}
		if events == 0 {
			t.Fatalf("no history for %s's refresh", u.Name)
		}
		if strings.Contains(workerLogs.String(), u.gh.Token) {
			t.Fatalf("the worker logged %s's token", u.Name)
		}
	}
}

// A hundred cold readers in one process make one request per page; a
// refresh during a storm of 5xx fails after its retries and leaves the
// cached rows as they were.
func TestGitHubCacheConcurrencyAndOutage(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	u := addGitHubUser(t, o+"-u")
	for i := range 3 {
		createRepo(t, u.gh.Login, fmt.Sprintf("r%d", i))
	}
	c := ghCache()
	mark := len(fg.Requests())
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Repos(ctx, u.Name, ghaccount.Filter{}, false)
			if err == nil && len(l.Repos) != 3 {
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
		t.Fatalf("100 cold readers made %d /user/repos and %d /user/orgs requests, want 1 each", n, m)
	}

	remove := fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/user/", Status: http.StatusBadGateway})
	defer remove()
	start := time.Now()
	l, err := c.Repos(ctx, u.Name, ghaccount.Filter{}, true)
	if err != nil || l.RefreshErr == nil || len(l.Repos) != 3 {
		t.Fatalf("refresh during a 5xx storm: %d repositories, refresh error %v, %v", len(l.Repos), l.RefreshErr, err)
	}
	t.Logf("the refresh gave up after %s", time.Since(start).Round(time.Second))
	remove()
	if l, err := c.Repos(ctx, u.Name, ghaccount.Filter{}, true); err != nil || l.RefreshErr != nil || len(l.Repos) != 3 {
		t.Fatalf("after the storm: %+v, %v", l, err)
	}
}

// collect --org: every repository of a 250-repository organization (three
// pages of the cache) is collected, as ordinary Collects.
func TestCollectOrg(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	org := o + "-big"
	u := addGitHubUser(t, o+"-admin")
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember(org, u.gh.Login); err != nil {
		t.Fatal(err)
	}
	const n = 250
	for i := range n {
		if _, err := fg.CreateRepo(org, fmt.Sprintf("r%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := ghCache().Repos(ctx, u.Name, ghaccount.Filter{Org: org}, false); err != nil || len(l.Repos) != n {
		t.Fatalf("cache: %d repositories, %v", len(l.Repos), err)
	}
	// A sweep already collecting one of them: joined, not doubled.
	first := repoid.ID{Host: fg.Host(), Owner: org, Name: "r000"}
	if err := workflows.StartCollect(ctx, env.Client, first); err != nil {
		t.Fatal(err)
	}
	sweepRun := currentRun(t, workflows.CollectWorkflowID(first))
	run, err := env.Client.ExecuteWorkflow(ctx, orgOptions(u.Name, org), workflows.CollectOrg,
		workflows.CollectOrgInput{UserID: u.ID, Org: org, Window: 25})
	if err != nil {
		t.Fatal(err)
	}
	var p workflows.CollectOrgProgress
	if err := run.Get(ctx, &p); err != nil || !p.Done || p.Started != n || p.Failed != 0 {
		t.Fatalf("CollectOrg: %+v, %v", p, err)
	}
	// collect-org.json is this test's run from before org-bounded-running;
	// TestCollectOrgBoundsRunningCollectionsOnTheServer records the path since.
	if got := currentRun(t, workflows.CollectWorkflowID(first)); got != sweepRun || got == "" {
		t.Fatalf("the sweep's collection of %s is run %s, the organization's %s: doubled", first, sweepRun, got)
	}
	for i := range n {
		r := repoid.ID{Host: fg.Host(), Owner: org, Name: fmt.Sprintf("r%03d", i)}
		var res workflows.CollectResult
		if err := env.Client.GetWorkflow(ctx, workflows.CollectWorkflowID(r), "").Get(ctx, &res); err != nil || !res.Empty {
			t.Fatalf("collect %s: %+v, %v", r, res, err)
		}
	}
}

// An organization starts collections only while fewer than MaxRunning
// Collect runs run, counted in the server's visibility store: with its
// collections slowed down by the host, no more than MaxRunning of them ever
// overlap, and all are collected.
func TestCollectOrgBoundsRunningCollectionsOnTheServer(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	org := o + "-bounded"
	u := addGitHubUser(t, o+"-importer")
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember(org, u.gh.Login); err != nil {
		t.Fatal(err)
	}
	const n, maxRunning = 6, 2
	for i := range n {
		createRepo(t, org, fmt.Sprintf("r%d", i), "README.md")
	}
	if l, err := ghCache().Repos(ctx, u.Name, ghaccount.Filter{Org: org}, false); err != nil || len(l.Repos) != n {
		t.Fatalf("cache: %d repositories, %v", len(l.Repos), err)
	}
	// Every git request of the organization takes a second: a collection
	// makes a few, so it runs for seconds.
	defer fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + org + "/", Latency: time.Second})()
	since := time.Now()
	run, err := env.Client.ExecuteWorkflow(ctx, orgOptions(u.Name, org), workflows.CollectOrg,
		workflows.CollectOrgInput{UserID: u.ID, Org: org, Window: 4, MaxRunning: maxRunning, RunningPoll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var p workflows.CollectOrgProgress
	if err := run.Get(ctxTimeout(t, 5*time.Minute), &p); err != nil || !p.Done || p.Started != n || p.Failed != 0 || p.Waits == 0 {
		t.Fatalf("CollectOrg: %+v, %v; want all %d started after waiting for room", p, err, n)
	}
	recordHistory(t, "collect-org-bounded", run.GetID(), run.GetRunID())
	type span struct{ start, end time.Time }
	var spans []span
	for i := range n {
		wid := workflows.CollectWorkflowID(repoid.ID{Host: fg.Host(), Owner: org, Name: fmt.Sprintf("r%d", i)})
		var res workflows.CollectResult
		if err := env.Client.GetWorkflow(ctx, wid, "").Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
			t.Fatalf("collect %s: %v", wid, err)
		}
		var runs []*workflowpb.WorkflowExecutionInfo
		poll.Until(t, wid+"'s run closed in visibility", time.Minute, func() (bool, string) {
			resp, err := env.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Query: fmt.Sprintf("WorkflowId = '%s' AND StartTime >= '%s'", wid, since.UTC().Format(time.RFC3339Nano))})
			if err != nil {
				t.Fatal(err)
			}
			runs = resp.Executions
			for _, e := range runs {
				if e.GetCloseTime() == nil {
					return false, "still open"
				}
			}
			return len(runs) > 0, "no run"
		})
		for _, e := range runs {
			spans = append(spans, span{e.GetStartTime().AsTime(), e.GetCloseTime().AsTime()})
		}
	}
	for _, s := range spans {
		overlapping := 0
		for _, o := range spans {
			if !o.start.After(s.start) && o.end.After(s.start) {
				overlapping++
			}
		}
		if overlapping > maxRunning {
			t.Fatalf("%d collections ran at once (at %s), over the bound of %d", overlapping, s.start, maxRunning)
		}
	}
}

// currentRun is the run id of a workflow's latest run.
func currentRun(t *testing.T, workflowID string) string {
	t.Helper()
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

func orgOptions(user, org string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: workflows.CollectOrgWorkflowID(user, org), TaskQueue: workflows.TaskQueue}
}

// GitHub's primary and secondary rate limits hold the refresh until they
// lift (the activity's NextRetryDelay, the token's gate), then it succeeds.
func TestGitHubCacheRateLimits(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	u := addGitHubUser(t, o+"-rl")
	createRepo(t, u.gh.Login, "app")
	for _, tc := range []struct {
		name  string
		fault forge.Fault
	}{
		{"primary", forge.Fault{Kind: forge.API, Path: "/api/v3/user/repos", RateLimit: true, ResetIn: 2 * time.Second, Times: 1}},
		{"secondary", forge.Fault{Kind: forge.API, Path: "/api/v3/user/repos", RetryAfter: 2 * time.Second, Times: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fg.AddFault(tc.fault)
			mark := len(fg.Requests())
			start := time.Now()
			res, err := workflows.RunGitHubCacheRefresh(ctx, env.Client, u.Name, u.ID)
			if err != nil || res.Repos != 1 {
				t.Fatalf("refresh: %+v, %v", res, err)
			}
			// One refused request, one after the limit lifted: nothing sent
			// in between.
			if n := apiCalls(mark, "user/repos"); n != 2 {
				t.Fatalf("%d /user/repos requests, want 2", n)
			}
			if d := time.Since(start); d < 2*time.Second {
				t.Fatalf("the refresh went on after %s, before the limit lifted", d)
			}
		})
	}
}

// A read behind GitHub's primary rate limit does not wait in silence for
// the limit to lift: it says that the limit holds the refresh and until
// when, with the cached data when there is some, and the refresh goes on
// by itself at the reset (issue 35: a cold read waited 600 s and said
// "context deadline exceeded").
func TestGitHubCacheReadSaysARateLimitHoldsIt(t *testing.T) {
	// The deadline decides failure only: a read that waits for the limit
	// would run past it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := owner(t)
	warm, cold := addGitHubUser(t, o+"-warm"), addGitHubUser(t, o+"-cold")
	createRepo(t, warm.gh.Login, "app")
	c := ghCache()
	if l, err := c.Repos(ctx, warm.Name, ghaccount.Filter{}, false); err != nil || len(l.Repos) != 1 {
		t.Fatalf("warm: %q, %v", names(l.Repos), err)
	}
	const reset = 10 * time.Minute
	defer fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/user/orgs", RateLimit: true, ResetIn: reset})()
	asked := time.Now()
	check := func(err error) {
		t.Helper()
		var rl *workflows.RateLimitedError
		if !errors.As(err, &rl) || rl.Until.Before(asked.Add(reset-time.Minute)) || !strings.Contains(err.Error(), "GitHub's rate limit") {
			t.Fatalf("%v; want the rate limit and its reset, %s away", err, reset)
		}
	}
	l, err := c.Repos(ctx, warm.Name, ghaccount.Filter{}, true)
	if err != nil || len(l.Repos) != 1 {
		t.Fatalf("warm, behind the limit: %q, %v; want the cached repository", names(l.Repos), err)
	}
	check(l.RefreshErr)
	_, err = c.Repos(ctx, cold.Name, ghaccount.Filter{}, false)
	check(err)
}
