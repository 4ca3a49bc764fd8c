package workflows_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"
)

// Each sweep test runs on a clock of its own, a thousand days apart, so the
// views it sets up are invisible to the other tests' sweeps: seen from
// another test's clock they are in the future or long idle.
var clockSeq atomic.Int64

func sweepClock() time.Time {
	return time.Now().UTC().Add(time.Duration(clockSeq.Add(1)) * 1000 * 24 * time.Hour).Truncate(time.Second)
}

const day = 24 * time.Hour

// sweepRepo is a collected repository with view, completion and failure
// times set relative to a sweep clock.
type sweepRepo struct {
	name            string
	viewed, done    *time.Duration // ago; nil = never
	failures        int
	changeAfterDone bool // push a commit after the collection
	wantDue         bool
	wantStarted     bool
}

func ago(d time.Duration) *time.Duration { return &d }

func setUp(t *testing.T, now time.Time, o string, repos []sweepRepo) map[string]int64 {
	t.Helper()
	ids := map[string]int64{}
	// Collected all at once, as the worker's slots allow.
	runs := make([]client.WorkflowRun, len(repos))
	for i, r := range repos {
		createRepo(t, o, r.name, "a.txt")
		runs[i] = startCollect(t, id(o, r.name))
	}
	for i, r := range repos {
		var res workflows.CollectResult
		if err := runs[i].Get(ctxTimeout(t, 5*time.Minute), &res); err != nil || res.Case != identity.CaseNew {
			t.Fatalf("collect %s: %+v, %v; want case A", r.name, res, err)
		}
		ids[r.name] = res.CodebaseID
		if r.changeAfterDone {
			commit(t, o, r.name, "b.txt")
		}
		at := func(d *time.Duration) *time.Time {
			if d == nil {
				return nil
			}
			v := now.Add(-*d)
			return &v
		}
		if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE codebases SET last_viewed_at = $2,
			last_completed_at = $3, consecutive_failures = $4 WHERE id = $1`,
			res.CodebaseID, at(r.viewed), at(r.done), r.failures); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func runSweep(t *testing.T, in workflows.RecollectionSweepInput) workflows.SweepResult {
	t.Helper()
	res, run := runSweepRun(t, in)
	if res.Started > 0 && !res.Halted {
		// recollection-sweep.json holds a run from before the event budget
		// (GetVersion sweep-event-budget), recollection-sweep-budget.json one
		// after it with a StartCollect a repository,
		// recollection-sweep-batched.json one with batched starts (GetVersion
		// sweep-batched-starts); recollection-sweep-bounded.json one that
		// counts the running Collects before it starts (GetVersion
		// sweep-bounded-running); recollection-sweep-unseen-started.json one
		// that counts as unseen only the runs a window started (GetVersion
		// sweep-unseen-started); this is one with a breaker per host, newest
		// first (GetVersion sweep-host-breaker, sweep-newest-first).
		name := "recollection-sweep-newest-first"
		if in.Carry != "" {
			name = "recollection-sweep-newest-first-carried" // reads and leaves where hosts halted
		}
		recordHistory(t, name, run.GetID(), run.GetRunID())
	}
	return res
}

// runSweepRun runs a sweep to its end and returns its result and run.
func runSweepRun(t *testing.T, in workflows.RecollectionSweepInput) (workflows.SweepResult, client.WorkflowRun) {
	t.Helper()
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.RecollectionSweep, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.SweepResult
	if err := run.Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
		t.Fatal(err)
	}
	return res, run
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// collectedSince reports whether a codebase completed a collection between
// since and now on the real clock (the times setUp writes are on the
// sweep's clock, far from both).
func collectedSince(t *testing.T, id int64, since time.Time) bool {
	cb := codebase(t, id)
	return cb.LastCompletedAt != nil && cb.LastCompletedAt.After(since) && !cb.LastCompletedAt.After(time.Now())
}

// waitCompleted waits until a codebase completes a collection after since.
func waitCompleted(t *testing.T, id int64, since time.Time) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("codebase %d collected again", id), time.Minute, func() (bool, string) {
		return collectedSince(t, id, since), "not yet"
	})
}

// requestsFor counts the forge's API requests and git fetches (upload-pack
// POSTs) that name one repository.
func requestsFor(owner, name string) (api, fetches int) {
	for _, r := range fg.Requests() {
		switch {
		case r.Kind == forge.API && strings.Contains(r.Path, "/"+owner+"/"+name):
			api++
		case r.Kind == forge.Git && r.Method == http.MethodPost && strings.HasPrefix(r.Path, "/"+owner+"/"+name+"."):
			fetches++
		}
	}
	return api, fetches
}

func TestSweepCollectsExactlyTheDueRepositories(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	repos := []sweepRepo{
		{name: "hot-unchanged", viewed: ago(day), done: ago(7 * time.Hour), wantDue: true},
		{name: "hot-changed", viewed: ago(day), done: ago(7 * time.Hour), changeAfterDone: true, wantDue: true, wantStarted: true},
		{name: "hot-fresh", viewed: ago(day), done: ago(2 * time.Hour), changeAfterDone: true},
		{name: "week-7d23h", viewed: ago(7*day + 23*time.Hour), done: ago(7 * time.Hour), changeAfterDone: true, wantDue: true, wantStarted: true},
		{name: "warm-8d", viewed: ago(8 * day), done: ago(7 * time.Hour), changeAfterDone: true},
		{name: "warm-due", viewed: ago(10 * day), done: ago(13 * time.Hour), changeAfterDone: true, wantDue: true, wantStarted: true},
		{name: "cold-90d", viewed: ago(90 * day), done: ago(8 * day), changeAfterDone: true, wantDue: true, wantStarted: true},
		{name: "idle-91d", viewed: ago(91 * day), done: ago(30 * day), changeAfterDone: true},
		{name: "never-viewed", done: ago(30 * day), changeAfterDone: true},
		{name: "future-view", viewed: ago(-day), done: ago(30 * day), changeAfterDone: true},
		{name: "never-completed", viewed: ago(day), changeAfterDone: true, wantDue: true, wantStarted: true},
		{name: "five-failures", viewed: ago(day), done: ago(30 * day), failures: 5, changeAfterDone: true},
	}
	ids := setUp(t, now, o, repos)
	before := time.Now()
	api0, fetches0 := requestsFor(o, "hot-unchanged")

	res := runSweep(t, workflows.RecollectionSweepInput{Now: now, PageSize: 4})
	var due, started int
	for _, r := range repos {
		if r.wantDue {
			due++
		}
		if r.wantStarted {
			started++
		}
	}
	if res.Due != due || res.Started != started || res.Unchanged != 1 || res.Halted || res.Runs != 1 {
		t.Fatalf("sweep = %+v, want %d due, %d started, 1 unchanged", res, due, started)
	}
	for _, r := range repos {
		if r.wantStarted {
			waitCompleted(t, ids[r.name], before)
		}
	}
	for _, r := range repos {
		if got := collectedSince(t, ids[r.name], before); got != r.wantStarted {
			t.Errorf("%s: collected = %v, want %v", r.name, got, r.wantStarted)
		}
	}
	// The unchanged repository cost an ls-remote: no clone, no API request.
	unchanged := codebase(t, ids["hot-unchanged"])
	if unchanged.LastCheckedAt == nil || !unchanged.LastCheckedAt.Equal(now) {
		t.Errorf("unchanged repository's check not recorded: %v", unchanged.LastCheckedAt)
	}
	if api, fetches := requestsFor(o, "hot-unchanged"); api != api0 || fetches != fetches0 {
		t.Errorf("the unchanged repository cost %d API requests and %d fetches", api-api0, fetches-fetches0)
	}

	// A second sweep on the same clock: everything is fresh or unchanged now.
	again := runSweep(t, workflows.RecollectionSweepInput{Now: now})
	if again.Started != 0 || again.Halted {
		t.Fatalf("second sweep on the same clock: %+v", again)
	}
}

// A sweep over a tiny budget hands over to new runs in the middle of pages
// on the real server: every changed repository is started once, the counts
// add up across the runs, and no run passes its budget.
func TestSweepContinuesAsNewOnTheServer(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	var repos []sweepRepo
	for i := range 5 {
		repos = append(repos, sweepRepo{name: fmt.Sprintf("r%d", i), viewed: ago(day), done: ago(10 * time.Hour), changeAfterDone: true})
	}
	ids := setUp(t, now, o, repos)
	before := time.Now()
	const budget = 3
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: now, PageSize: 2, StartWindow: 1, StartBatch: 1,
			MaxActivitiesPerRun: budget})
	if err != nil {
		t.Fatal(err)
	}
	first := run.GetRunID() // Get follows the chain to its last run
	var res workflows.SweepResult
	if err := run.Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
		t.Fatal(err)
	}
	if res.Considered != 5 || res.Due != 5 || res.Started != 5 || res.Halted || res.Runs < 3 {
		t.Fatalf("sweep = %+v, want 5 considered, due and started over several runs", res)
	}
	chain := sweepChainOf(t, run.GetID(), first)
	if len(chain) != res.Runs {
		t.Fatalf("%d runs in the chain, the result says %d", len(chain), res.Runs)
	}
	for i, r := range chain {
		if r.activities > budget {
			t.Errorf("run %d scheduled %d activities, over the budget of %d", i+1, r.activities, budget)
		}
	}
	for _, r := range repos {
		waitCompleted(t, ids[r.name], before)
		if n := collectRunsSince(t, id(o, r.name), before); n != 1 {
			t.Errorf("%s: %d Collect runs, want 1", r.name, n)
		}
	}
	// The first run: it hands over in the middle of a page, after a count
	// and a StartCollects of one (recollection-sweep-continued.json: after a
	// StartCollect, from before batched starts;
	// recollection-sweep-batched-continued.json: from before the count).
	recordHistory(t, "recollection-sweep-bounded-continued", run.GetID(), first)
}

// sweepRun is one run of a sweep's continue-as-new chain.
type sweepRun struct {
	runID      string
	events     int
	activities int
}

// sweepChainOf follows a sweep's continue-as-new chain from its first run.
func sweepChainOf(t testing.TB, workflowID, runID string) []sweepRun {
	var chain []sweepRun
	for runID != "" {
		r := sweepRun{runID: runID}
		next := ""
		it := env.Client.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			r.events++
			if e.GetActivityTaskScheduledEventAttributes() != nil {
				r.activities++
			}
			if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		chain = append(chain, r)
		runID = next
	}
	return chain
}

// collectRunsSince counts the Collect runs of a repository started since.
func collectRunsSince(t *testing.T, r repoid.ID, since time.Time) int {
	t.Helper()
	resp, err := env.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", workflows.CollectWorkflowID(r))})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range resp.Executions {
		if !e.GetStartTime().AsTime().Before(since) {
			n++
		}
	}
	return n
}

func TestSweepCircuitBreaker(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	var repos []sweepRepo
	for i := range 5 {
		repos = append(repos, sweepRepo{name: fmt.Sprintf("r%d", i), viewed: ago(day), done: ago(10 * time.Hour), changeAfterDone: true})
	}
	setUp(t, now, o, repos)
	remove := fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + o + "/", Status: http.StatusServiceUnavailable})
	res := runSweep(t, workflows.RecollectionSweepInput{Now: now})
	remove()
	if !res.Halted || res.Failed != 3 || res.Started != 0 {
		t.Fatalf("sweep against a failing forge: %+v, want halted after 3 failures", res)
	}
	// The next cycle starts fresh.
	res = runSweep(t, workflows.RecollectionSweepInput{Now: now})
	if res.Halted || res.Started != 5 {
		t.Fatalf("next sweep: %+v, want all 5 started", res)
	}
}

func TestPrivateRepositoryDropsOutAfterFiveFailures(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	ids := setUp(t, now, o, []sweepRepo{{name: "secret", viewed: ago(day), done: ago(30 * day)}})
	if err := fg.SetPrivate(o, "secret", true); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		res := runSweep(t, workflows.RecollectionSweepInput{Now: now})
		if res.Gone != 1 || res.Halted {
			t.Fatalf("sweep %d: %+v, want the private repository counted as gone", i, res)
		}
		if f := codebase(t, ids["secret"]).ConsecutiveFailures; f != i {
			t.Fatalf("after sweep %d: %d failures", i, f)
		}
	}
	before := gitRequestsFor(o)
	res := runSweep(t, workflows.RecollectionSweepInput{Now: now})
	if res.Gone != 0 || gitRequestsFor(o) != before {
		t.Fatalf("sixth sweep: %+v, %d git requests; the repository should no longer be attempted", res, gitRequestsFor(o)-before)
	}
	// A manual collect resets the streak (and fails again, counting one).
	if err := fg.SetPrivate(o, "secret", false); err != nil {
		t.Fatal(err)
	}
	mustCollect(t, id(o, "secret"), identity.CaseSame)
	if f := codebase(t, ids["secret"]).ConsecutiveFailures; f != 0 {
		t.Fatalf("failures after a successful manual collect: %d", f)
	}
}

// Two sweeps overlapping with manual collects never run two Collects for one
// codebase at a time: every start joins the run in flight for its repository.
func TestOverlappingSweepsAndManualCollects(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	var repos []sweepRepo
	for i := range 4 {
		repos = append(repos, sweepRepo{name: fmt.Sprintf("r%d", i), viewed: ago(day), done: ago(10 * time.Hour), changeAfterDone: true})
	}
	setUp(t, now, o, repos)
	since := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); runSweep(t, workflows.RecollectionSweepInput{Now: now, StartWindow: 4}) }()
	}
	for _, r := range repos {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = collect(t, id(o, r.name)) }()
	}
	wg.Wait()
	for _, r := range repos {
		wid := workflows.CollectWorkflowID(id(o, r.name))
		resp, err := env.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s'", wid)})
		if err != nil {
			t.Fatal(err)
		}
		type span struct{ start, end time.Time }
		var spans []span
		for _, e := range resp.Executions {
			if e.GetStartTime().AsTime().Before(since) {
				continue
			}
			end := time.Now()
			if e.GetCloseTime() != nil {
				end = e.GetCloseTime().AsTime()
			}
			spans = append(spans, span{e.GetStartTime().AsTime(), end})
		}
		for i := range spans {
			for j := i + 1; j < len(spans); j++ {
				if spans[i].start.Before(spans[j].end) && spans[j].start.Before(spans[i].end) {
					t.Fatalf("%s: two Collect runs overlapped: %v and %v", wid, spans[i], spans[j])
				}
			}
		}
		if len(spans) == 0 {
			t.Fatalf("%s: no Collect ran", wid)
		}
	}
}

func TestSchedulesTriggerSweepAndCleanup(t *testing.T) {
	ctx := context.Background()
	// Long intervals: the test triggers them itself.
	if err := workflows.EnsureSchedules(ctx, env.Client, workflows.ScheduleConfig{SweepEvery: 240 * time.Hour, CleanupEvery: 240 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	// Applying twice is fine and keeps one schedule each.
	if err := workflows.EnsureSchedules(ctx, env.Client, workflows.ScheduleConfig{SweepEvery: 240 * time.Hour, CleanupEvery: 240 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	o := owner(t)
	now := time.Now().UTC()
	// The scheduled sweep runs on the real clock; these views spread over
	// the decay bands around it (other tests' views are far from it).
	repos := []sweepRepo{
		{name: "hot-due", viewed: ago(time.Hour), done: ago(7 * time.Hour), changeAfterDone: true, wantStarted: true},
		{name: "hot-fresh", viewed: ago(time.Hour), done: ago(5 * time.Hour), changeAfterDone: true},
		{name: "warm-fresh", viewed: ago(9 * day), done: ago(11 * time.Hour), changeAfterDone: true},
		{name: "cold-due", viewed: ago(89 * day), done: ago(8 * day), changeAfterDone: true, wantStarted: true},
		{name: "idle", viewed: ago(92 * day), done: ago(30 * day), changeAfterDone: true},
	}
	ids := setUp(t, now, o, repos)
	before := time.Now()
	trigger(t, workflows.SweepScheduleID)
	for _, r := range repos {
		if r.wantStarted {
			waitCompleted(t, ids[r.name], before)
		}
	}
	for _, r := range repos {
		if got := collectedSince(t, ids[r.name], before); got != r.wantStarted {
			t.Errorf("%s: collected by the scheduled sweep = %v, want %v", r.name, got, r.wantStarted)
		}
	}

	// Stale cleanup: only codebases stale for more than 30 days go.
	old := setUp(t, now, o, []sweepRepo{{name: "gone-31d"}, {name: "gone-29d"}})
	for name, age := range map[string]time.Duration{"gone-31d": 31 * day, "gone-29d": 29 * day} {
		if err := env.Store.MarkStale(ctx, old[name], now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	trigger(t, workflows.StaleCleanupScheduleID)
	poll.Until(t, "the stale-cleanup schedule deletes a codebase stale for 31 days", time.Minute, func() (bool, string) {
		cb, err := env.Store.CodebaseByID(ctx, old["gone-31d"])
		return cb == nil, fmt.Sprintf("still there (%v)", err)
	})
	if cb, _ := env.Store.CodebaseByID(ctx, old["gone-29d"]); cb == nil {
		t.Fatal("the stale cleanup deleted a codebase stale for 29 days")
	}
}

// requireTargetMemo checks that a scheduled run names what it works on in
// its memo, for the Web UI.
func requireTargetMemo(t *testing.T, run *client.ScheduleWorkflowExecution) {
	t.Helper()
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), run.WorkflowID, run.FirstExecutionRunID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.GetWorkflowExecutionInfo().GetMemo().GetFields()["target"]; !ok {
		t.Errorf("%s has no memo naming its target", run.WorkflowID)
	}
}

// trigger starts a schedule's action now and waits for that run to finish.
func trigger(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	h := env.Client.ScheduleClient().GetHandle(ctx, id)
	d, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	actions := d.Info.NumActions
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "schedule "+id+": the triggered run finishes", time.Minute, func() (bool, string) {
		d, err = h.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return d.Info.NumActions > actions && len(d.Info.RunningWorkflows) == 0,
			fmt.Sprintf("%d actions, %d running", d.Info.NumActions, len(d.Info.RunningWorkflows))
	})
	requireTargetMemo(t, d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult)
}

// A Git host outage is the host's doing, not the repositories': five hourly
// sweeps against a host that answers every repository 404, 401 or 403 (a
// proxy, a firewall, a host in trouble) halt at the breaker and strike
// nobody; once the outage is over, the next sweep collects every one of
// them. (Before, each sweep counted every repository as gone: after five
// hours all 50 had left the sweep for good, and no sweep halted.)
func TestHostOutageStrikesNobody(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	var repos []sweepRepo
	for i := range 50 {
		repos = append(repos, sweepRepo{name: fmt.Sprintf("r%02d", i), viewed: ago(day), done: ago(10 * time.Hour), changeAfterDone: true})
	}
	ids := setUp(t, now, o, repos)
	for hour, status := range []int{http.StatusNotFound, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnauthorized} {
		remove := fg.AddFault(forge.Fault{Kind: forge.Git, Status: status}) // the whole host
		res := runSweep(t, workflows.RecollectionSweepInput{Now: now.Add(time.Duration(hour) * time.Hour)})
		remove()
		if !res.Halted || res.Gone != 0 || res.Started != 0 {
			t.Fatalf("sweep %d of the outage (every repository %d): %+v, want halted by the breaker, nothing gone or started",
				hour+1, status, res)
		}
	}
	for _, r := range repos {
		if f := codebase(t, ids[r.name]).ConsecutiveFailures; f != 0 {
			t.Fatalf("%s has %d failures after the outage, want none", r.name, f)
		}
	}
	before := time.Now()
	res := runSweep(t, workflows.RecollectionSweepInput{Now: now.Add(5 * time.Hour)})
	if res.Halted || res.Started != len(repos) {
		t.Fatalf("sweep after the outage: %+v, want all %d started", res, len(repos))
	}
	for _, r := range repos {
		waitCompleted(t, ids[r.name], before)
	}
}

// The sweep's change check covers every branch and tag the scan selects,
// not only HEAD: a push to a side branch while the default branch stays
// still is collected, and its secret found. (Before, the check compared
// HEAD alone: the repository was "unchanged" and the secret never found.)
func TestSweepCollectsAPushToASideBranch(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	ids := setUp(t, now, o, []sweepRepo{{name: "app", viewed: ago(day), done: ago(7 * time.Hour)}})
	head := codebase(t, ids["app"]).LastCommitSHA
	if _, err := fg.Commit(o, "app", "feature", map[string]string{"deploy/ci.env": "GITHUB_TOKEN=" + ghToken + "\n"}, "ci"); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	res := runSweep(t, workflows.RecollectionSweepInput{Now: now})
	if res.Started != 1 || res.Unchanged != 0 {
		t.Fatalf("sweep after a push to a side branch: %+v, want it started", res)
	}
	waitCompleted(t, ids["app"], before)
	if cb := codebase(t, ids["app"]); cb.LastCommitSHA != head {
		t.Fatalf("the default branch moved: %s, want %s", cb.LastCommitSHA, head)
	}
	found := false
	for _, f := range findings(t, shard.CodebaseKey(ids["app"])) {
		found = found || f.Path == "deploy/ci.env"
	}
	if !found {
		t.Fatalf("the secret pushed to the side branch was not found: %v", rules(findings(t, shard.CodebaseKey(ids["app"]))))
	}
	// Nothing moved since: the next due sweep finds it unchanged.
	if res := runSweep(t, workflows.RecollectionSweepInput{Now: now.Add(7 * time.Hour)}); res.Unchanged != 1 || res.Started != 0 {
		t.Fatalf("sweep with nothing pushed: %+v, want unchanged", res)
	}
}

// The sweep starts only while fewer than MaxRunning Collect runs run,
// counted in the server's visibility store: with collections slowed down
// by the host, no more than MaxRunning of them ever overlap, and all are
// collected.
func TestSweepBoundsRunningCollectionsOnTheServer(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	var repos []sweepRepo
	for i := range 6 {
		repos = append(repos, sweepRepo{name: fmt.Sprintf("r%d", i), viewed: ago(day), done: ago(10 * time.Hour), changeAfterDone: true})
	}
	ids := setUp(t, now, o, repos)
	// Every git request of the owner takes a second: a collection makes a
	// few, so it runs for seconds.
	defer fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + o + "/", Latency: time.Second})()
	since := time.Now()
	const maxRunning = 2
	res := runSweep(t, workflows.RecollectionSweepInput{Now: now, MaxRunning: maxRunning, RunningPoll: time.Second})
	if res.Started != len(repos) || res.Halted || res.Waits == 0 {
		t.Fatalf("sweep = %+v, want all %d started after waiting for room", res, len(repos))
	}
	type span struct{ start, end time.Time }
	var spans []span
	for _, r := range repos {
		waitCompleted(t, ids[r.name], since)
		// The run closes just after it records the collection.
		if err := env.Client.GetWorkflow(context.Background(), workflows.CollectWorkflowID(id(o, r.name)), "").Get(ctxTimeout(t, time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		var runs []*workflowpb.WorkflowExecutionInfo
		poll.Until(t, r.name+"'s run closed in visibility", time.Minute, func() (bool, string) {
			resp, err := env.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
				Query: fmt.Sprintf("WorkflowId = '%s' AND StartTime >= '%s'", workflows.CollectWorkflowID(id(o, r.name)), since.UTC().Format(time.RFC3339Nano))})
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

// A host halted by its breaker is taken up by the next sweep where it
// stopped, and each sweep checks the most recently viewed first. Three
// repositories of the host, the most viewed, fail their checks (503): the
// first sweep checks them first, halts the host after them and leaves its
// place for the next sweep of its Carry; the next sweep, the three still
// failing, defers them and checks and collects the host's other three —
// before, every sweep restarted at the same place (the oldest view) and a
// host that halted on the same repositories never went past them. The
// sweep after the outage collects the three that failed.
func TestSweepResumesAHaltedHostWhereItStopped(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	var repos []sweepRepo
	for i, name := range []string{"hot1", "hot2", "hot3", "cold1", "cold2", "cold3"} {
		repos = append(repos, sweepRepo{name: name, viewed: ago(time.Duration(i+1) * time.Hour), done: ago(10 * time.Hour), changeAfterDone: true})
	}
	ids := setUp(t, now, o, repos)
	var removes []func()
	for _, name := range []string{"hot1", "hot2", "hot3"} {
		removes = append(removes, fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + o + "/" + name + ".", Status: http.StatusServiceUnavailable}))
	}
	carry := "test-" + o
	before := time.Now()

	first, run := runSweepRun(t, workflows.RecollectionSweepInput{Now: now, Carry: carry})
	host := strings.ToLower(fg.Host())
	if !first.Halted || first.Failed != 3 || first.Started != 0 || first.Skipped != 3 || !slices.Equal(first.HaltedHosts, []string{host}) {
		t.Fatalf("first sweep: %+v, want the three most viewed checked first, failing, and %s halted after them", first, host)
	}
	recordHistory(t, "recollection-sweep-host-halted", run.GetID(), run.GetRunID())

	second, run := runSweepRun(t, workflows.RecollectionSweepInput{Now: now.Add(time.Minute), Carry: carry})
	if second.Halted || second.Deferred != 3 || second.Started != 3 || second.Failed != 0 {
		t.Fatalf("second sweep, the three still failing: %+v, want them deferred and the other three started", second)
	}
	recordHistory(t, "recollection-sweep-resumed", run.GetID(), run.GetRunID())
	for _, name := range []string{"cold1", "cold2", "cold3"} {
		waitCompleted(t, ids[name], before)
	}
	for _, name := range []string{"hot1", "hot2", "hot3"} {
		if collectedSince(t, ids[name], before) {
			t.Fatalf("%s collected while its checks failed", name)
		}
	}

	for _, remove := range removes {
		remove()
	}
	third := runSweep(t, workflows.RecollectionSweepInput{Now: now.Add(2 * time.Minute), Carry: carry})
	if third.Halted || third.Deferred != 0 || third.Started != 3 || third.Unchanged != 3 {
		t.Fatalf("sweep after the outage: %+v, want the three that failed started, the others unchanged", third)
	}
	for _, name := range []string{"hot1", "hot2", "hot3"} {
		waitCompleted(t, ids[name], before)
	}
}
