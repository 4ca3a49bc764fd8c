package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/api/workflowservice/v1"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/workflows"
)

func TestUsersAndGitHubRepos(t *testing.T) {
	login := fmt.Sprintf("gh%d", seq.Add(1))
	fu, err := fg.AddUser(login)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"one", "two"} {
		if _, err := fg.CreateRepo(login, n); err != nil {
			t.Fatal(err)
		}
	}
	// Bad input: no token, a wrong token, a token in an argument is no option.
	if _, _, code := starterIn(t, "", "users", "add", login); code != exitUsage {
		t.Errorf("users add without a token: exit %d, want %d", code, exitUsage)
	}
	if _, errOut, code := starterIn(t, "ghp_wrong\n", "users", "add", login); code != exitFailed || !strings.Contains(errOut, "users add") {
		t.Errorf("users add with a wrong token: exit %d, %s", code, errOut)
	}
	if _, _, code := starterIn(t, fu.Token, "users", "add", "bad/name"); code != exitUsage {
		t.Errorf("users add with a bad name: exit %d", code)
	}
	out, errOut, code := starterIn(t, fu.Token+"\n", "users", "add", login)
	if code != 0 || !strings.Contains(out, "GitHub "+login) {
		t.Fatalf("users add: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, fu.Token) {
		t.Fatal("users add printed the token")
	}
	if out, _, _ := starter(t, "users", "list"); !strings.Contains(out, login) || strings.Contains(out, fu.Token) {
		t.Fatalf("users list:\n%s", out)
	}
	// Ten concurrent readers of a cold user (each its own cache, as ten
	// processes) make one refresh workflow run.
	var wg sync.WaitGroup
	outs := make([]string, 10)
	codes := make([]int, 10)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _, codes[i] = starter(t, "github", "repos", "--user", login)
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if codes[i] != 0 || !strings.Contains(o, "2 repositories") || !strings.Contains(o, login+"/one") || !strings.Contains(o, "cached") {
			t.Fatalf("github repos #%d: exit %d\n%s", i, codes[i], o)
		}
	}
	runs, err := env.Client.ListWorkflow(context.Background(), listRequest(fmt.Sprintf("WorkflowId = '%s'", workflows.GitHubCacheRefreshWorkflowID(login))))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(runs.GetExecutions()); n != 1 {
		t.Fatalf("%d refresh runs for ten concurrent readers, want 1", n)
	}
	out, _, code = starter(t, "github", "repos", "--user", login, "--json")
	var repos []ghaccount.Repo
	if code != 0 || json.Unmarshal([]byte(out), &repos) != nil || len(repos) != 2 || repos[0].Source != ghaccount.Personal {
		t.Fatalf("github repos --json: exit %d\n%s", code, out)
	}
	if out, _, code := starter(t, "github", "orgs", "--user", login); code != 0 || !strings.Contains(out, "0 organizations") {
		t.Fatalf("github orgs: exit %d\n%s", code, out)
	}
	if _, _, code := starter(t, "github", "repos", "--user", "nobody-"+login); code != exitUsage {
		t.Errorf("unknown user: exit %d", code)
	}
	if out, _, code := starter(t, "users", "remove", login); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("users remove: exit %d", code)
	}
	if _, _, code := starter(t, "users", "remove", login); code != exitUsage {
		t.Errorf("removing a removed user: exit %d", code)
	}
}

func listRequest(query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: env.Namespace, Query: query}
}
