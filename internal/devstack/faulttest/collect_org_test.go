package faulttest

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/secrets"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// A CollectOrg whose worker is killed (SIGKILL) part way goes on on another
// worker: every repository is collected once, none is lost.
func TestCollectOrgSurvivesWorkerKill(t *testing.T) {
	ctx := context.Background()
	stamp := time.Now().UnixNano() % 1_000_000_000
	org, login := fmt.Sprintf("kill%d-org", stamp), fmt.Sprintf("kill%d-u", stamp)
	fu, err := fg.AddUser(login)
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember(org, login); err != nil {
		t.Fatal(err)
	}
	const n = 120
	for i := range n {
		if _, err := fg.CreateRepo(org, fmt.Sprintf("r%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	box, err := secrets.ParseKey(tokenKey)
	if err != nil {
		t.Fatal(err)
	}
	u, err := env.Store.PutUser(ctx, store.NewUser{Name: login, APIURL: fg.APIURL(), Login: login, GitHubID: fu.ID,
		TokenSealed: box.Seal([]byte(fu.Token), store.TokenContext(login))})
	if err != nil {
		t.Fatal(err)
	}
	first := startWorker(t)
	if _, err := workflows.RunGitHubCacheRefresh(ctx, env.Client, login, u.ID); err != nil {
		t.Fatal(err)
	}
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.CollectOrgWorkflowID(login, org),
		TaskQueue: workflows.TaskQueue}, workflows.CollectOrg, workflows.CollectOrgInput{UserID: u.ID, Org: org, Window: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Kill the worker once some collections have started (Temporal pushes
	// no progress events: the query is polled).
	poll.Until(t, "20 collections started", 2*time.Minute, func() (bool, string) {
		v, err := env.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.ProgressQuery)
		var p workflows.CollectOrgProgress
		return err == nil && v.Get(&p) == nil && p.Started >= 20, fmt.Sprintf("%+v, %v", p, err)
	})
	first.signal(syscall.SIGKILL)
	startWorker(t)
	var p workflows.CollectOrgProgress
	if err := run.Get(ctx, &p); err != nil || !p.Done || p.Started != n || p.Failed != 0 {
		t.Fatalf("after the kill: %+v, %v", p, err)
	}
	for i := range n {
		r := repoid.ID{Host: fg.Host(), Owner: org, Name: fmt.Sprintf("r%03d", i)}
		var res workflows.CollectResult
		if err := env.Client.GetWorkflow(ctx, workflows.CollectWorkflowID(r), "").Get(ctx, &res); err != nil {
			t.Fatalf("collect %s: %v", r, err)
		}
	}
}
