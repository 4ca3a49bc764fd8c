package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/infra/mirror"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/infra/vcs"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

var ownerSeq atomic.Int64

// owner returns a fresh owner name so tests never see each other's
// repositories or codebases.
func owner(t *testing.T) string {
	return fmt.Sprintf("o%d-%d", time.Now().Unix()%100000, ownerSeq.Add(1))
}

func id(owner, name string) repoid.ID { return repoid.ID{Host: fg.Host(), Owner: owner, Name: name} }

func createRepo(t *testing.T, owner, name string, files ...string) (forge.Repo, string) {
	t.Helper()
	r, err := fg.CreateRepo(owner, name)
	if err != nil {
		t.Fatal(err)
	}
	var head string
	for _, f := range files {
		head = commit(t, owner, name, f)
	}
	return r, head
}

func commit(t *testing.T, owner, name, file string) string {
	t.Helper()
	sha, err := fg.Commit(owner, name, "main", map[string]string{file: "content of " + file + "\n"}, "add "+file)
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

func startCollect(t *testing.T, r repoid.ID) client.WorkflowRun {
	t.Helper()
	run, err := env.Client.ExecuteWorkflow(context.Background(), workflows.CollectOptions(r), workflows.Collect, workflows.CollectInput{Repo: r, Trigger: "manual"})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func collect(t *testing.T, r repoid.ID) (workflows.CollectResult, error) {
	t.Helper()
	res, _, err := collectRun(t, r)
	return res, err
}

func collectRun(t *testing.T, r repoid.ID) (workflows.CollectResult, client.WorkflowRun, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.CollectResult
	run := startCollect(t, r)
	err := run.Get(ctx, &res)
	return res, run, err
}

func mustCollect(t *testing.T, r repoid.ID, want identity.Case) workflows.CollectResult {
	t.Helper()
	res, err := collect(t, r)
	if err != nil {
		t.Fatalf("collect %s: %v", r, err)
	}
	if res.Case != want {
		t.Fatalf("collect %s: case %s (%s), want %s (%s)", r, res.Case, res.Case.Describe(), want, want.Describe())
	}
	return res
}

func codebase(t *testing.T, id int64) *store.Codebase {
	t.Helper()
	cb, err := env.Store.CodebaseByID(context.Background(), id)
	if err != nil || cb == nil {
		t.Fatalf("codebase %d: %v, %v", id, cb, err)
	}
	return cb
}

func codebasesWithExternalID(t *testing.T, ext int64) int {
	t.Helper()
	var n int
	err := env.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM codebases WHERE host = $1 AND external_repo_id = $2`,
		fg.Host(), strconv.FormatInt(ext, 10)).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// apiRequestsFor counts API requests whose path names owner.
func apiRequestsFor(owner string) int {
	n := 0
	for _, r := range fg.Requests() {
		if r.Kind == forge.API && (strings.Contains(r.Path, "/"+owner+"/") || strings.HasPrefix(r.Path, "/api/v3/repositories/")) {
			n++
		}
	}
	return n
}

func TestCaseA_NewRepository(t *testing.T) {
	o := owner(t)
	repo, head := createRepo(t, o, "app", "README.md")
	gitBefore := gitRequestsFor(o)
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil || res.Case != identity.CaseNew {
		t.Fatalf("collect: %+v, %v; want case A", res, err)
	}
	collectGit := gitRequestsFor(o) - gitBefore
	recordHistory(t, "collect-new", run.GetID(), run.GetRunID())

	// One mirror sync per collection, its scan included: as many Git
	// requests as one sync of the same repository into an empty mirror.
	m, err := mirror.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	gitBefore = gitRequestsFor(o)
	if _, err := m.Sync(context.Background(), fg.CloneURL(o, "app")); err != nil {
		t.Fatal(err)
	}
	if one := gitRequestsFor(o) - gitBefore; collectGit != one {
		t.Errorf("the collection made %d Git requests; one mirror sync makes %d", collectGit, one)
	}
	cb := codebase(t, res.CodebaseID)
	if cb.ExternalID != strconv.FormatInt(repo.ID, 10) || cb.LastCommitSHA != head || cb.DefaultBranch != "main" || cb.LastCompletedAt == nil {
		t.Fatalf("codebase = %+v, want external id %d, last commit %s", cb, repo.ID, head)
	}
	if res.Commit != head || res.Repository != id(o, "app") {
		t.Fatalf("result = %+v", res)
	}

	// The case and codebase are visible to Temporal's visibility (Web UI).
	desc, err := env.Client.DescribeWorkflowExecution(context.Background(), workflows.CollectWorkflowID(id(o, "app")), "")
	if err != nil {
		t.Fatal(err)
	}
	sa := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	if got := string(sa[workflows.SACase.GetName()].GetData()); got != `"A"` {
		t.Errorf("search attribute %s = %s, want \"A\"", workflows.SACase.GetName(), got)
	}
	if got := string(sa[workflows.SACodebase.GetName()].GetData()); got != strconv.FormatInt(res.CodebaseID, 10) {
		t.Errorf("search attribute %s = %s, want %d", workflows.SACodebase.GetName(), got, res.CodebaseID)
	}
}

func TestCaseB_RecollectNeedsNoAPIRequest(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)

	// Unchanged: the remote advertises the last commit as HEAD.
	before := apiRequestsFor(o)
	mustCollect(t, id(o, "app"), identity.CaseSame)
	// Changed: the last commit is proven present by fetching it by SHA.
	head := commit(t, o, "app", "b.txt")
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil || res.Case != identity.CaseSame {
		t.Fatalf("collect: %+v, %v; want case B", res, err)
	}
	recordHistory(t, "collect-verified", run.GetID(), run.GetRunID())
	if n := apiRequestsFor(o) - before; n != 0 {
		t.Fatalf("re-collections made %d API requests, want 0", n)
	}
	if res.CodebaseID != first.CodebaseID || codebase(t, res.CodebaseID).LastCommitSHA != head {
		t.Fatalf("re-collection = %+v, want codebase %d at %s", res, first.CodebaseID, head)
	}
}

func TestCaseD_Rename(t *testing.T) {
	o := owner(t)
	repo, _ := createRepo(t, o, "old", "a.txt")
	first := mustCollect(t, id(o, "old"), identity.CaseNew)
	if err := fg.Rename(o, "old", "new"); err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "new"), identity.CaseMoved)
	if res.CodebaseID != first.CodebaseID || res.Repository != id(o, "new") {
		t.Fatalf("rename: %+v, want codebase %d now at %s/new", res, first.CodebaseID, o)
	}
	if cb := codebase(t, first.CodebaseID); cb.Name != "new" || cb.StaleSince != nil {
		t.Fatalf("codebase after rename = %+v", cb)
	}
	// The old name redirects to the same repository: same codebase, no API.
	before := apiRequestsFor(o)
	if res := mustCollect(t, id(o, "old"), identity.CaseSame); res.CodebaseID != first.CodebaseID {
		t.Fatalf("collect by the old name: %+v", res)
	}
	if n := apiRequestsFor(o) - before; n != 0 {
		t.Errorf("collect by the old name made %d API requests", n)
	}
	if n := codebasesWithExternalID(t, repo.ID); n != 1 {
		t.Fatalf("%d codebases for repository %d, want 1", n, repo.ID)
	}
}

func TestCaseD_Transfer(t *testing.T) {
	o, o2 := owner(t), owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if err := fg.Transfer(o, "app", o2); err != nil {
		t.Fatal(err)
	}
	commit(t, o2, "app", "b.txt")
	res := mustCollect(t, id(o2, "app"), identity.CaseMoved)
	if res.CodebaseID != first.CodebaseID || codebase(t, res.CodebaseID).Owner != o2 {
		t.Fatalf("transfer: %+v", res)
	}
	hist, err := env.Store.Collections(context.Background(), res.CodebaseID, 10)
	if err != nil || len(hist) != 2 || hist[1].Repo.Owner != o {
		t.Fatalf("history kept across the transfer: %+v, %v", hist, err)
	}
}

func TestCaseE_DeleteAndRecreate(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if err := fg.Delete(o, "app"); err != nil {
		t.Fatal(err)
	}
	repo, _ := createRepo(t, o, "app", "other.txt")
	res := mustCollect(t, id(o, "app"), identity.CaseReplaced)
	if res.CodebaseID == first.CodebaseID || res.RetiredCodebaseID != first.CodebaseID {
		t.Fatalf("recreate: %+v, want a new codebase and %d retired", res, first.CodebaseID)
	}
	if codebase(t, first.CodebaseID).StaleSince == nil {
		t.Fatal("the deleted repository's codebase is not stale")
	}
	if cb := codebase(t, res.CodebaseID); cb.ExternalID != strconv.FormatInt(repo.ID, 10) {
		t.Fatalf("new codebase = %+v, want external id %d", cb, repo.ID)
	}
}

func TestCaseF_ForcePush(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt", "b.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	head, err := fg.ForcePush(o, "app", "main", map[string]string{"rewritten.txt": "x\n"}, "rewrite history")
	if err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "app"), identity.CaseForcePush)
	if res.CodebaseID != first.CodebaseID || codebase(t, res.CodebaseID).LastCommitSHA != head {
		t.Fatalf("force push: %+v", res)
	}
}

func TestCaseR_StaleRepositoryComesBack(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	// The repository moves away and another takes its name: collecting the
	// name retires the first codebase (E)...
	if err := fg.Rename(o, "app", "moved"); err != nil {
		t.Fatal(err)
	}
	createRepo(t, o, "app", "impostor.txt")
	mustCollect(t, id(o, "app"), identity.CaseReplaced)
	if codebase(t, first.CodebaseID).StaleSince == nil {
		t.Fatal("first codebase not stale")
	}
	// ...until it is collected under its new name: it comes back (R).
	res := mustCollect(t, id(o, "moved"), identity.CaseReturned)
	if res.CodebaseID != first.CodebaseID {
		t.Fatalf("came back as %d, want %d", res.CodebaseID, first.CodebaseID)
	}
	if cb := codebase(t, first.CodebaseID); cb.StaleSince != nil || cb.Name != "moved" {
		t.Fatalf("returned codebase = %+v", cb)
	}
}

// Two repositories swap names: the rename of one targets the name the
// other's live codebase still holds; that codebase is retired in the same
// transaction, and comes back when its repository is collected.
func TestRenameOntoANameHeldByALiveCodebase(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "a", "a.txt")
	createRepo(t, o, "b", "b.txt")
	ca := mustCollect(t, id(o, "a"), identity.CaseNew)
	cbID := mustCollect(t, id(o, "b"), identity.CaseNew).CodebaseID
	for _, step := range [][2]string{{"b", "tmp"}, {"a", "b"}, {"tmp", "a"}} {
		if err := fg.Rename(o, step[0], step[1]); err != nil {
			t.Fatal(err)
		}
	}
	res := mustCollect(t, id(o, "b"), identity.CaseReplaced)
	if res.CodebaseID != ca.CodebaseID || res.RetiredCodebaseID != cbID {
		t.Fatalf("collect %s/b after the swap: %+v, want codebase %d, %d retired", o, res, ca.CodebaseID, cbID)
	}
	res = mustCollect(t, id(o, "a"), identity.CaseReturned)
	if res.CodebaseID != cbID {
		t.Fatalf("collect %s/a after the swap: %+v, want codebase %d back", o, res, cbID)
	}
}

func TestRaceRenamedBetweenCloneAndAPI(t *testing.T) {
	o := owner(t)
	repo, _ := createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	// Rewrite history so the next collection must ask the API, and rename
	// the repository just before the API answers.
	if _, err := fg.ForcePush(o, "app", "main", map[string]string{"x": "y"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	remove := fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/repos/" + o + "/app", Times: 1,
		Before: func(*http.Request) {
			once.Do(func() {
				if err := fg.Rename(o, "app", "app2"); err != nil {
					t.Error(err)
				}
			})
		}})
	defer remove()
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "collect-race", run.GetID(), run.GetRunID())
	recordHistory(t, "resolve-identity-race-retry", run.GetID()+"/identity", "")
	if res.Attempts != 2 || res.CodebaseID != first.CodebaseID || res.Repository != id(o, "app2") {
		t.Fatalf("race: %+v, want 2 attempts ending at %s/app2 on codebase %d", res, o, first.CodebaseID)
	}
	if n := codebasesWithExternalID(t, repo.ID); n != 1 {
		t.Fatalf("%d codebases for the repository, want 1", n)
	}
}

// A repository deleted and created anew under its name between the clone
// and the API lookup has the same name but a creation time after the clone
// started: the collection starts over rather than give the new repository
// the old one's commits.
func TestRaceRecreatedBetweenCloneAndAPI(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if _, err := fg.ForcePush(o, "app", "main", map[string]string{"x": "y"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var recreated forge.Repo
	var head string
	remove := fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/repos/" + o + "/app", Times: 1,
		Before: func(*http.Request) {
			once.Do(func() {
				// The API's creation times are whole seconds: let the clock
				// pass the clone's second first.
				nextSecond()
				// This runs in the forge's handler: t.Error, not t.Fatal.
				var err error
				if err = fg.Delete(o, "app"); err == nil {
					if recreated, err = fg.CreateRepo(o, "app"); err == nil {
						head, err = fg.Commit(o, "app", "main", map[string]string{"b.txt": "new\n"}, "add b.txt")
					}
				}
				if err != nil {
					t.Error(err)
				}
			})
		}})
	defer remove()
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "collect-race-recreated", run.GetID(), run.GetRunID())
	if os.Getenv("GITFLEET_RECORD_HISTORIES") != "" {
		recordHistory(t, "resolve-identity-race-recreated", run.GetID()+"/identity", firstChildRun(t, run.GetID(), run.GetRunID()))
	}
	if res.Attempts != 2 || res.Case != identity.CaseReplaced || res.CodebaseID == first.CodebaseID || res.Commit != head {
		t.Fatalf("recreated under the clone: %+v, want 2 attempts, case E on a new codebase at %s", res, head)
	}
	if n := codebasesWithExternalID(t, recreated.ID); n != 1 {
		t.Fatalf("%d codebases for the new repository, want 1", n)
	}
}

// The API's 404 for a known codebase's name is checked by its id, with a
// token that sees the owner (the forge's, a site administrator's): gone for
// good, the codebase goes stale.
func TestAPINotFoundMarksStaleAndFailsPermanent(t *testing.T) {
	o := owner(t)
	repo, _ := createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if _, err := fg.ForcePush(o, "app", "main", map[string]string{"x": "y"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v3/repos/" + o + "/app", "/api/v3/repositories/" + strconv.FormatInt(repo.ID, 10)} {
		defer fg.AddFault(forge.Fault{Kind: forge.API, Path: path, Status: http.StatusNotFound})()
	}
	before := apiRequestsFor(o)
	_, run, err := collectRun(t, id(o, "app"))
	// collect-not-found.json: a run from before GetVersion gone-needs-proof,
	// which took the name's 404 for proof.
	recordHistory(t, "collect-not-found-proven", run.GetID(), run.GetRunID())
	recordHistory(t, "resolve-identity-not-found-proven", run.GetID()+"/identity", firstChildRun(t, run.GetID(), run.GetRunID()))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) || !strings.Contains(app.Error(), "no longer exists") {
		t.Fatalf("collect of a repository the API does not know: %v, want Permanent", err)
	}
	if n := apiRequestsFor(o) - before; n != 3 {
		t.Errorf("%d API requests, want exactly 3: the name, the id and the name again (Permanent is not retried)", n)
	}
	cb := codebase(t, first.CodebaseID)
	if cb.StaleSince == nil {
		t.Fatal("codebase not marked stale")
	}
	hist, _ := env.Store.Collections(context.Background(), cb.ID, 1)
	if len(hist) != 1 || hist[0].Status != "failed" || hist[0].ErrorClass != string(errclass.Permanent) {
		t.Fatalf("failed collection not recorded: %+v", hist)
	}
}

func TestRetryableAPIErrorsAreRetried(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	remove := fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/repos/" + o + "/app", Status: http.StatusBadGateway, Times: 2})
	defer remove()
	before := apiRequestsFor(o)
	mustCollect(t, id(o, "app"), identity.CaseNew)
	if n := apiRequestsFor(o) - before; n != 3 {
		t.Fatalf("%d API requests, want 3 (two 502s retried)", n)
	}
}

func TestSecondaryRateLimitIsWaitedOut(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	remove := fg.AddFault(forge.Fault{Kind: forge.API, Path: "/api/v3/repos/" + o + "/app", RetryAfter: time.Second, Times: 1})
	defer remove()
	mustCollect(t, id(o, "app"), identity.CaseNew)
}

func TestPrivateRepositoryFailsPermanentWithoutRetry(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "secret", "a.txt")
	if err := fg.SetPrivate(o, "secret", true); err != nil {
		t.Fatal(err)
	}
	gitBefore := gitRequestsFor(o)
	_, err := collect(t, id(o, "secret"))
	mustFailPermanent(t, err, "is private")
	if n := gitRequestsFor(o) - gitBefore; n != 1 {
		t.Errorf("%d git requests, want 1 (not retried)", n)
	}
}

func gitRequestsFor(owner string) int {
	n := 0
	for _, r := range fg.Requests() {
		if r.Kind == forge.Git && strings.HasPrefix(r.Path, "/"+owner+"/") {
			n++
		}
	}
	return n
}

func TestEmptyRepository(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "empty")
	res := mustCollect(t, id(o, "empty"), identity.CaseNew)
	if !res.Empty || res.Commit != "" {
		t.Fatalf("empty repository: %+v", res)
	}
	head := commit(t, o, "empty", "first.txt")
	res2 := mustCollect(t, id(o, "empty"), identity.CaseSame)
	if res2.CodebaseID != res.CodebaseID || codebase(t, res.CodebaseID).LastCommitSHA != head {
		t.Fatalf("first commit after empty: %+v", res2)
	}
}

func TestConcurrentCollectsShareOneRun(t *testing.T) {
	o := owner(t)
	repo, _ := createRepo(t, o, "app", "a.txt")
	runs := make([]client.WorkflowRun, 4)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Different letter case, same repository, same workflow id.
			r := id(o, "app")
			if i%2 == 1 {
				r.Name = "APP"
			}
			runs[i] = startCollect(t, r)
		}()
	}
	wg.Wait()
	for _, run := range runs[1:] {
		if run.GetRunID() != runs[0].GetRunID() {
			t.Fatalf("concurrent requests started runs %s and %s", runs[0].GetRunID(), run.GetRunID())
		}
	}
	var res workflows.CollectResult
	if err := runs[0].Get(context.Background(), &res); err != nil {
		t.Fatal(err)
	}
	if n := codebasesWithExternalID(t, repo.ID); n != 1 {
		t.Fatalf("%d codebases, want 1", n)
	}
}

func TestConcurrentCollectsOfOldAndNewName(t *testing.T) {
	o := owner(t)
	repo, _ := createRepo(t, o, "old", "a.txt")
	mustCollect(t, id(o, "old"), identity.CaseNew)
	if err := fg.Rename(o, "old", "new"); err != nil {
		t.Fatal(err)
	}
	// Force the API path for both, so both race to apply a decision.
	if _, err := fg.ForcePush(o, "new", "main", map[string]string{"x": "y"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]workflows.CollectResult, 2)
	errs := make([]error, 2)
	for i, name := range []string{"old", "new"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = collect(t, id(o, name))
		}()
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	if results[0].CodebaseID != results[1].CodebaseID {
		t.Fatalf("old and new name resolved to codebases %d and %d", results[0].CodebaseID, results[1].CodebaseID)
	}
	if n := codebasesWithExternalID(t, repo.ID); n != 1 {
		t.Fatalf("%d codebases, want 1", n)
	}
	if cb := codebase(t, results[0].CodebaseID); cb.Name != "new" || cb.StaleSince != nil {
		t.Fatalf("codebase = %+v, want live at %s/new", cb, o)
	}
}

func TestCleanupStale(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	res := mustCollect(t, id(o, "app"), identity.CaseNew)
	if err := env.Store.MarkStale(context.Background(), res.CodebaseID, time.Now().Add(-31*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.CleanupStale, workflows.CleanupStaleInput{})
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.CleanupStaleResult
	if err := run.Get(context.Background(), &out); err != nil || out.Deleted < 1 {
		t.Fatalf("cleanup = %+v, %v", out, err)
	}
	recordHistory(t, "cleanup-stale-batched", run.GetID(), run.GetRunID())
	if cb, _ := env.Store.CodebaseByID(context.Background(), res.CodebaseID); cb != nil {
		t.Fatal("stale codebase survived the cleanup")
	}
}

// The API token authenticates the worker's API requests but never reaches a
// workflow input, a history or a log line.
func TestTokenNeverLeaks(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	if err := fg.SetPrivate(o, "app", false); err != nil {
		t.Fatal(err)
	}
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil || res.Case != identity.CaseNew {
		t.Fatalf("collect: %+v, %v", res, err)
	}
	// The token was really used: a wrong one is refused by the forge.
	authed := false
	for _, r := range fg.Requests() {
		if r.Kind == forge.API && strings.Contains(r.Path, "/"+o+"/") && r.Status == http.StatusOK {
			authed = true
		}
	}
	if !authed {
		t.Fatal("no successful API request for the repository")
	}
	for _, wid := range []string{run.GetID(), run.GetID() + "/identity"} {
		it := env.Client.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(e.String(), apiToken) {
				t.Fatalf("history of %s holds the token in event %d (%s)", wid, e.GetEventId(), e.GetEventType())
			}
		}
	}
	if logs := workerLogs.String(); logs == "" || strings.Contains(logs, apiToken) {
		t.Fatalf("worker logs empty or holding the token (%d bytes)", len(logs))
	}
}

// gitfleet's git requests are anonymous: the forge, like GitHub, answers
// them 401 for unknown and private repositories.

// deleteByFaults makes a repository look deleted without losing it (as a
// repository GitHub restores keeps its id): git refuses it, the API does
// not know its name or its id. The returned func restores it.
func deleteByFaults(t *testing.T, owner, name string, extID int64) (restore func()) {
	t.Helper()
	removes := []func(){
		fg.AddFault(forge.Fault{Kind: forge.Git, PathRE: regexp.MustCompile(`^/` + owner + `/` + name + `(\.git)?/`), Status: http.StatusUnauthorized}),
		fg.AddFault(forge.Fault{Kind: forge.API, PathRE: regexp.MustCompile(`^/api/v3/repos/` + owner + `/` + name + `$`), Status: http.StatusNotFound}),
		fg.AddFault(forge.Fault{Kind: forge.API, PathRE: regexp.MustCompile(`^/api/v3/repositories/` + strconv.FormatInt(extID, 10) + `$`), Status: http.StatusNotFound}),
	}
	return func() {
		for _, r := range removes {
			r()
		}
	}
}

func mustFailPermanent(t *testing.T, err error, want string) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) || !strings.Contains(app.Error(), want) {
		t.Fatalf("error = %v, want Permanent saying %q", err, want)
	}
	return app
}

func TestRefusedDeletedRepositoryGoesStaleAndComesBack(t *testing.T) {
	o := owner(t)
	repo, _ := createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)

	restore := deleteByFaults(t, o, "app", repo.ID)
	_, run, err := collectRun(t, id(o, "app"))
	recordHistory(t, "collect-refused-gone", run.GetID(), run.GetRunID())
	mustFailPermanent(t, err, "no longer exists since")
	cb := codebase(t, first.CodebaseID)
	if cb.StaleSince == nil {
		t.Fatal("codebase of a deleted repository not marked stale")
	}
	hist, _ := env.Store.Collections(context.Background(), cb.ID, 1)
	if len(hist) != 1 || hist[0].Status != "failed" || !strings.Contains(hist[0].ErrorMessage, "no longer exists") {
		t.Fatalf("failed collection not recorded on the codebase: %+v", hist)
	}

	restore()
	res := mustCollect(t, id(o, "app"), identity.CaseReturned)
	if res.CodebaseID != first.CodebaseID || codebase(t, first.CodebaseID).StaleSince != nil {
		t.Fatalf("restored repository: %+v, want codebase %d live again", res, first.CodebaseID)
	}
}

func TestRefusedDeletedRepositoryIsCleanedUpAfter30Days(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if err := fg.Delete(o, "app"); err != nil {
		t.Fatal(err)
	}
	_, err := collect(t, id(o, "app"))
	mustFailPermanent(t, err, "no longer exists since")
	if codebase(t, first.CodebaseID).StaleSince == nil {
		t.Fatal("codebase of a deleted repository not marked stale")
	}
	// 30 days pass: the stored timestamp moves back instead.
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE codebases SET stale_since = stale_since - interval '31 days' WHERE id = $1`,
		first.CodebaseID); err != nil {
		t.Fatal(err)
	}
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.CleanupStale, workflows.CleanupStaleInput{})
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.CleanupStaleResult
	if err := run.Get(context.Background(), &out); err != nil || out.Deleted < 1 {
		t.Fatalf("cleanup = %+v, %v", out, err)
	}
	if cb, _ := env.Store.CodebaseByID(context.Background(), first.CodebaseID); cb != nil {
		t.Fatal("the deleted repository's codebase survived the cleanup")
	}
}

// A rename the host kept no redirect for: git refuses the old name, the API
// finds the codebase's id under the new one, and the collection goes on as D.
func TestRefusedRenamedRepositoryGoesOnAsMoved(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if err := fg.Rename(o, "app", "moved"); err != nil {
		t.Fatal(err)
	}
	remove := fg.AddFault(forge.Fault{Kind: forge.Git, PathRE: regexp.MustCompile(`^/` + o + `/app(\.git)?/`), Status: http.StatusUnauthorized})
	defer remove()
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "collect-refused-moved", run.GetID(), run.GetRunID())
	if res.Case != identity.CaseMoved || res.CodebaseID != first.CodebaseID || res.Repository != id(o, "moved") || res.Attempts != 2 {
		t.Fatalf("collect of a renamed repository without redirect: %+v, want D on codebase %d at %s/moved", res, first.CodebaseID, o)
	}
}

func TestRefusedUnknownRepositorySaysNotFound(t *testing.T) {
	o := owner(t)
	_, err := collect(t, id(o, "nothing"))
	app := mustFailPermanent(t, err, "not found (or private")
	if strings.Contains(app.Error(), "authentication required") {
		t.Fatalf("error = %v, says authentication required", err)
	}
}

// outcomeOf is a run's GitfleetOutcome search attribute.
func outcomeOf(t *testing.T, workflowID, runID string) string {
	t.Helper()
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), workflowID, runID)
	if err != nil {
		t.Fatal(err)
	}
	var outcome string
	if p := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.SAOutcome.GetName()]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &outcome); err != nil {
			t.Fatal(err)
		}
	}
	return outcome
}

// Cancelling a Collect is a cancel: the run ends cancelled, its outcome says
// so, the collection is recorded as cancelled and nothing is charged to the
// repository. (Before, it was a failed collection, a strike and
// GitfleetOutcome=failed.)
func TestCancelledCollectIsACancel(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	commit(t, o, "app", "b.txt")
	fetching := make(chan struct{}, 1)
	defer fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + o + "/app", Latency: time.Minute, Before: func(*http.Request) {
		select {
		case fetching <- struct{}{}:
		default:
		}
	}})()
	run := startCollect(t, id(o, "app"))
	select {
	case <-fetching:
	case <-ctxTimeout(t, time.Minute).Done():
		t.Fatal("the collection never fetched")
	}
	if err := env.Client.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()); err != nil {
		t.Fatal(err)
	}
	var canceled *temporal.CanceledError
	if err := run.Get(ctxTimeout(t, time.Minute), nil); !errors.As(err, &canceled) {
		t.Fatalf("cancelled collection ended with %v, want cancelled", err)
	}
	recordHistory(t, "collect-cancelled", run.GetID(), run.GetRunID())
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
		t.Fatalf("status %v, %v; want cancelled", d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	if got := outcomeOf(t, run.GetID(), run.GetRunID()); got != workflows.OutcomeCancelled {
		t.Errorf("%s = %q, want %q", workflows.SAOutcome.GetName(), got, workflows.OutcomeCancelled)
	}
	cb := codebase(t, first.CodebaseID)
	hist, _ := env.Store.Collections(context.Background(), cb.ID, 1)
	if cb.ConsecutiveFailures != 0 || len(hist) != 1 || hist[0].Status != "cancelled" {
		t.Fatalf("after the cancel: %d failures, history %+v; want none, and the collection cancelled", cb.ConsecutiveFailures, hist)
	}
}

// blindWorker runs the collection's workflows and activities on a task
// queue of its own, with a GitHub token that sees no private repository of
// the test's owners (a user of the forge in no organization): a worker
// whose token cannot tell a deleted repository from a hidden one.
func blindWorker(t *testing.T) string {
	t.Helper()
	const queue = "gitfleet-blind-token"
	blindOnce.Do(func() {
		user, err := fg.AddUser(fmt.Sprintf("outsider%d", time.Now().UnixNano()%1e6))
		if err != nil {
			blindErr = err
			return
		}
		hs, err := vcs.NewHosts(vcs.Host{Name: fg.Host(), GitURL: fg.URL(), APIURL: fg.APIURL(), Token: user.Token})
		if err != nil {
			blindErr = err
			return
		}
		mirrors, err := mirror.New(filepath.Join(env.Dir, "mirrors-blind"), nil)
		if err != nil {
			blindErr = err
			return
		}
		_, blindErr = env.StartWorker(queue, func(w worker.Registry) {
			workflows.Register(w)
			w.RegisterActivity(&activities.Activities{Store: env.Store, Mirrors: mirrors, Hosts: hs})
		}, workflows.GitTaskQueue(queue))
	})
	if blindErr != nil {
		t.Fatal(blindErr)
	}
	return queue
}

var (
	blindOnce sync.Once
	blindErr  error
)

// A repository made private, seen by a worker whose token cannot see it,
// is inaccessible: kept live (not stale), never deleted by stale-cleanup,
// counted as its own failure; collected again, it is readable again. Only
// proof that it is gone — the API's 404 to a token that sees the owner —
// makes a codebase stale. (Before, the API's 404 made it stale, and the
// daily cleanup deleted it with its findings 30 days later.)
func TestRepositoryMadePrivateIsInaccessibleNotDeleted(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "leaked", "a.txt")
	first := mustCollect(t, id(o, "leaked"), identity.CaseNew)
	if err := fg.SetPrivate(o, "leaked", true); err != nil {
		t.Fatal(err)
	}
	o2 := workflows.CollectOptions(id(o, "leaked"))
	o2.TaskQueue = blindWorker(t)
	run, err := env.Client.ExecuteWorkflow(context.Background(), o2, workflows.Collect, workflows.CollectInput{Repo: id(o, "leaked"), Trigger: "sweep"})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctxTimeout(t, 2*time.Minute), nil)
	recordHistory(t, "collect-refused-inaccessible", run.GetID(), run.GetRunID())
	mustFailPermanent(t, err, "can no longer be read")
	cb := codebase(t, first.CodebaseID)
	if cb.StaleSince != nil || cb.InaccessibleSince == nil || cb.ConsecutiveFailures != 1 {
		t.Fatalf("codebase of a repository made private: %+v, want live, inaccessible, one failure", cb)
	}
	// Thirty days later the daily cleanup runs: the codebase stays.
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE codebases SET inaccessible_since = inaccessible_since - interval '31 days'
		WHERE id = $1`, cb.ID); err != nil {
		t.Fatal(err)
	}
	cleanup, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.CleanupStale, workflows.CleanupStaleInput{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cleanup.Get(ctxTimeout(t, 2*time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if cb, _ := env.Store.CodebaseByID(context.Background(), first.CodebaseID); cb == nil || cb.StaleSince != nil {
		t.Fatalf("the stale cleanup deleted (or staled) an inaccessible codebase: %+v", cb)
	}
	// Public again: collected, readable, its streak reset.
	if err := fg.SetPrivate(o, "leaked", false); err != nil {
		t.Fatal(err)
	}
	mustCollect(t, id(o, "leaked"), identity.CaseSame)
	if cb := codebase(t, first.CodebaseID); cb.InaccessibleSince != nil || cb.ConsecutiveFailures != 0 {
		t.Fatalf("collected again: %+v, want readable, no failures", cb)
	}

	// Deleted, the blind token still cannot tell: inaccessible again. The
	// worker's own token (the forge's site administrator's) can: stale.
	if err := fg.Delete(o, "leaked"); err != nil {
		t.Fatal(err)
	}
	run, err = env.Client.ExecuteWorkflow(context.Background(), o2, workflows.Collect, workflows.CollectInput{Repo: id(o, "leaked"), Trigger: "sweep"})
	if err != nil {
		t.Fatal(err)
	}
	mustFailPermanent(t, run.Get(ctxTimeout(t, 2*time.Minute), nil), "can no longer be read")
	if cb := codebase(t, first.CodebaseID); cb.StaleSince != nil || cb.InaccessibleSince == nil {
		t.Fatalf("deleted, seen by a blind token: %+v, want inaccessible, not stale", cb)
	}
	_, err = collect(t, id(o, "leaked"))
	mustFailPermanent(t, err, "no longer exists since")
	if cb := codebase(t, first.CodebaseID); cb.StaleSince == nil {
		t.Fatalf("deleted, proven by a token that sees the owner: %+v, want stale", cb)
	}
}

// An expired GITHUB_TOKEN is the infrastructure's failure, not the
// repository's: git refuses a repository, the API refuses the token, and
// the collection fails without a strike. (Before, it counted toward the
// five failures that take a repository out of the sweep.)
func TestExpiredTokenStrikesNobody(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	defer fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + o + "/app", Status: http.StatusUnauthorized})()
	defer fg.AddFault(forge.Fault{Kind: forge.API, Status: http.StatusUnauthorized})() // every API request: bad credentials
	for range 2 {
		run, err := env.Client.ExecuteWorkflow(context.Background(), workflows.CollectOptions(id(o, "app")), workflows.Collect,
			workflows.CollectInput{Repo: id(o, "app"), Trigger: "sweep"})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctxTimeout(t, 2*time.Minute), nil); err == nil {
			t.Fatal("the collection succeeded")
		}
	}
	cb := codebase(t, first.CodebaseID)
	hist, _ := env.Store.Collections(context.Background(), cb.ID, 2)
	if cb.ConsecutiveFailures != 0 || cb.StaleSince != nil || cb.InaccessibleSince != nil || len(hist) != 2 || hist[0].Status != "failed" {
		t.Fatalf("after two collections under an expired token: %+v, history %+v; want two failures recorded, none counted", cb, hist)
	}
}

// A GITHUB_TOKEN the API rejects hides every deletion until it is
// replaced, so the collection's failure — the run's error and the
// recorded collection `starter show` lists — names it, and charges
// nobody. (Before, the failure said only "authentication required"; the
// rejection was in the worker's log alone.)
func TestRejectedTokenIsNamedInTheFailure(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	defer fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + o + "/app", Status: http.StatusUnauthorized})()
	// The worker's GITHUB_TOKEN's requests (the App's own are answered).
	defer fg.AddFault(forge.Fault{Kind: forge.API, PathRE: regexp.MustCompile(`^/api/v3/(repos|repositories|user)(/|$)`),
		Status: http.StatusUnauthorized})()
	_, run, err := collectRun(t, id(o, "app"))
	recordHistory(t, "collect-refused-token-rejected", run.GetID(), run.GetRunID())
	app := mustFailPermanent(t, err, "GitHub rejected the worker's GITHUB_TOKEN (401 Bad credentials)")
	if !strings.Contains(app.Error(), "the API could not say why") {
		t.Errorf("the failure does not say git's refusal went unexplained: %v", app)
	}
	cb := codebase(t, first.CodebaseID)
	hist, _ := env.Store.Collections(context.Background(), cb.ID, 1)
	if len(hist) != 1 || hist[0].Status != "failed" || !strings.Contains(hist[0].ErrorMessage, "GitHub rejected the worker's GITHUB_TOKEN") {
		t.Fatalf("the recorded collection (starter show's history): %+v; want it failed, naming the rejected token", hist)
	}
	if cb.ConsecutiveFailures != 0 || cb.StaleSince != nil || cb.InaccessibleSince != nil {
		t.Fatalf("after a collection under a rejected token: %+v; want nothing charged or marked", cb)
	}
}

// The API does not know a name git just served, yet knows the codebase's
// id there (a lagging index): the collection resolves by the id, at once
// (case F here), in one attempt, and nothing says git refused. (Before, it
// was asked as a refused fetch, read as "moved under the clone", started
// over 5 times in ~30 s and failed "git refused … although the API says it
// exists and is public".)
func TestMissingNameResolvedByID(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if _, err := fg.ForcePush(o, "app", "main", map[string]string{"x": "y"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	defer fg.AddFault(forge.Fault{Kind: forge.API, PathRE: regexp.MustCompile(`^/api/v3/repos/` + o + `/app$`), Status: http.StatusNotFound})()
	res, run, err := collectRun(t, id(o, "app"))
	recordHistory(t, "collect-missing-name-by-id", run.GetID(), run.GetRunID())
	if os.Getenv("GITFLEET_RECORD_HISTORIES") != "" {
		recordHistory(t, "resolve-identity-missing-name-by-id", run.GetID()+"/identity", firstChildRun(t, run.GetID(), run.GetRunID()))
	}
	if err != nil || res.Case != identity.CaseForcePush || res.CodebaseID != first.CodebaseID || res.Attempts != 1 {
		t.Fatalf("collect with the name unknown to the API: %+v, %v; want case F on codebase %d in one attempt", res, err, first.CodebaseID)
	}
}

// A repository deleted and created anew right after the clone, while the
// API's index does not know the new one's name yet: the old id is gone,
// the name asked again holds the new repository, created after the clone —
// a race, detected in that run: resolution starts over and the old
// codebase is replaced (case E). (Before, the old codebase was marked
// stale and the collection failed "… its name now holds another repository
// that git refuses too", though git had served it.)
func TestMissingNameRecreatedUnderTheClone(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if _, err := fg.ForcePush(o, "app", "main", map[string]string{"x": "y"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	var recreated forge.Repo
	var head string
	remove := fg.AddFault(forge.Fault{Kind: forge.API, PathRE: regexp.MustCompile(`^/api/v3/repos/` + o + `/app$`), Times: 1,
		Status: http.StatusNotFound, Before: func(*http.Request) {
			// The API's creation times are whole seconds: let the clock
			// pass the clone's second first.
			nextSecond()
			// This runs in the forge's handler: t.Error, not t.Fatal.
			var err error
			if err = fg.Delete(o, "app"); err == nil {
				if recreated, err = fg.CreateRepo(o, "app"); err == nil {
					head, err = fg.Commit(o, "app", "main", map[string]string{"b.txt": "new\n"}, "add b.txt")
				}
			}
			if err != nil {
				t.Error(err)
			}
		}})
	defer remove()
	res, err := collect(t, id(o, "app"))
	if err != nil || res.Attempts != 2 || res.Case != identity.CaseReplaced || res.RetiredCodebaseID != first.CodebaseID || res.Commit != head {
		t.Fatalf("recreated under the clone, the new name unknown to the API: %+v, %v; want 2 attempts, case E retiring %d at %s",
			res, err, first.CodebaseID, head)
	}
	if n := codebasesWithExternalID(t, recreated.ID); n != 1 {
		t.Fatalf("%d codebases for the new repository, want 1", n)
	}
}

// nextSecond returns once the wall clock has passed into the next whole
// second. The forge's creation times are whole seconds, so a repository
// recreated after it is seen as younger than a clone made before it. This
// sleep waits for a clock boundary, not for other work, so load cannot make
// it too short: it cannot make a test flaky.
func nextSecond() {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
}
