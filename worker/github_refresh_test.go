package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/secrets"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// A worker killed in the middle of a user's GitHub cache refresh holds its
// callers up for a heartbeat timeout, not the activity's five minutes: the
// attempt is declared dead by its heartbeat, and the retry on another
// worker takes the pages the first one saved without asking GitHub again
// (issue 35: the read waited 319.6 s and fetched every page again).
func TestGitHubRefreshResumesAfterItsWorkerIsKilled(t *testing.T) {
	ctx := context.Background()
	fg := startForge(t)
	gu, err := fg.AddUser("killed-refresh")
	if err != nil {
		t.Fatal(err)
	}
	const repos = 250 // three pages of /user/repos
	for i := range repos {
		if _, err := fg.CreateRepo(gu.Login, fmt.Sprintf("r%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	box, err := secrets.ParseKey(tokenKey)
	if err != nil {
		t.Fatal(err)
	}
	u, err := env.Store.PutUser(ctx, store.NewUser{Name: gu.Login, APIURL: fg.APIURL(), Login: gu.Login, GitHubID: gu.ID,
		TokenSealed: box.Seal([]byte(gu.Token), store.TokenContext(gu.Login))})
	if err != nil {
		t.Fatal(err)
	}

	// The first worker dies as it asks for the second page of the user's
	// repositories; that request hangs until the test ends.
	secondPage := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	page2 := func(r *http.Request) bool { return r.URL.Query().Get("page") == "2" }
	var first sync.Once
	defer fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/user/repos", Before: func(r *http.Request) {
		if page2(r) {
			hang := false
			first.Do(func() { close(secondPage); hang = true })
			if hang {
				<-done
			}
		}
	}})()
	const a, b = "refresh-a", "refresh-b"
	t.Cleanup(func() { forgetWorkers(t, a, b) })
	wa := startWorker(t, config.EnvWorkerID+"="+a, vcs.EnvAPIURL+"="+fg.APIURL())
	wa.waitLine(t, "Started Worker")
	mark := len(fg.Requests())
	refreshed := make(chan error, 1)
	go func() {
		_, err := workflows.RunGitHubCacheRefresh(ctx, env.Client, u.Name, u.ID)
		refreshed <- err
	}()
	select {
	case <-secondPage:
	case err := <-refreshed:
		t.Fatalf("the refresh ended before its second page: %v", err)
	}
	_ = wa.p.Cmd.Process.Kill()
	<-wa.p.Done()
	startWorker(t, config.EnvWorkerID+"="+b, vcs.EnvAPIURL+"="+fg.APIURL())
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}

	l, err := env.Store.CachedRepos(ctx, u.ID, ghaccount.Filter{IncludeArchived: true}, "", 0)
	if err != nil || len(l) != repos {
		t.Fatalf("cached %d repositories, %v; want %d", len(l), err, repos)
	}
	// Each page the first attempt finished was asked for once.
	asked := map[string]int{}
	for _, r := range fg.Requests()[mark:] {
		if r.Kind == forge.API {
			asked[r.Path+"?"+r.Query]++
		}
	}
	for url, n := range asked {
		if n > 1 && !(url == "/api/v3/user/repos?affiliation=owner,collaborator,organization_member&sort=full_name&per_page=100&page=2") {
			t.Errorf("%s asked for %d times", url, n)
		}
	}
	// The dead attempt ended by its heartbeat timeout.
	it := env.Client.GetWorkflowHistory(ctx, workflows.GitHubCacheRefreshWorkflowID(u.Name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var timeout enumspb.TimeoutType
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if s := e.GetActivityTaskStartedEventAttributes(); s != nil && s.GetAttempt() > 1 {
			timeout = s.GetLastFailure().GetTimeoutFailureInfo().GetTimeoutType()
		}
	}
	if timeout != enumspb.TIMEOUT_TYPE_HEARTBEAT {
		t.Errorf("the killed attempt ended by %v, want its heartbeat timeout", timeout)
	}
}
