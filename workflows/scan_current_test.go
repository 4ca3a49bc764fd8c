package workflows_test

import (
	"context"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/actions"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// A re-collection that finds the branches, tags and rules of the last,
// complete scan starts no scan: no ExecuteShard child, none of its
// activities. A new commit scans again, and so would new rules.
func TestRecollectionOfAnUnchangedRepositorySkipsTheScan(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	queue := "gitfleet-current-" + o
	scanner, err := activities.NewScanner("", testenv.FindingKey)
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := mirror.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivity(&activities.Activities{Store: env.Store, Hosts: hosts, Mirrors: mirrors, Policy: scanner.Policy()})
		w.RegisterActivity(&activities.Shards{Store: env.Store, Mirrors: mirrors, Scanner: scanner, BatchBlobs: 50})
	}, workflows.GitTaskQueue(queue))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var last client.WorkflowRun
	collect := func(r repoid.ID) (workflows.CollectResult, []string) {
		t.Helper()
		opts := workflows.CollectOptions(r)
		opts.TaskQueue = queue
		run, err := env.Client.ExecuteWorkflow(ctx, opts, workflows.Collect, workflows.CollectInput{Repo: r, Trigger: "sweep"})
		if err != nil {
			t.Fatal(err)
		}
		last = run
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var res workflows.CollectResult
		if err := run.Get(wctx, &res); err != nil {
			t.Fatalf("collect %s: %v", r, err)
		}
		var children []string
		it := env.Client.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
				children = append(children, a.GetWorkflowType().GetName())
			}
		}
		return res, children
	}
	// scheduled lists the activities the last run scheduled.
	scheduled := func() []string {
		t.Helper()
		var names []string
		it := env.Client.GetWorkflowHistory(ctx, last.GetID(), last.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				names = append(names, a.GetActivityType().GetName())
			}
		}
		return names
	}
	r := id(o, "app")
	createRepo(t, o, "app", "README.md")
	if res, children := collect(r); res.Case != identity.CaseNew || res.ScanCurrent || len(children) != 2 {
		t.Fatalf("first collection: %+v, children %v; want case A, scanned", res, children)
	}
	res, children := collect(r)
	if res.Case != identity.CaseSame || !res.ScanCurrent || res.Scan != nil || len(children) != 0 {
		t.Fatalf("unchanged re-collection: %+v, children %v; want case B, no scan, no child", res, children)
	}
	recordHistory(t, "collect-confirmed", last.GetID(), last.GetRunID())
	// What it costs (architecture, "Capacity"): placed, synced, confirmed;
	// one upsert of the Web UI's attributes beside the baseline's version.
	if got, want := scheduled(), []string{"PlaceGitWork", "SyncMirror", "ConfirmCodebase"}; !slices.Equal(got, want) {
		t.Fatalf("unchanged re-collection ran %v, want %v", got, want)
	}
	c, err := actions.Of(ctx, env.Client, last.GetID(), last.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	if c.Workflows != 1 || c.Upserts != 2 || c.Memos != 0 || c.Timers != 0 || c.Billable() > 6 {
		t.Fatalf("unchanged re-collection cost %s; want 1 workflow, 3 activities, 2 upserts, no memo: 6 actions before heartbeats", c)
	}
	d, err := env.Client.DescribeWorkflowExecution(ctx, last.GetID(), last.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	sa := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for _, k := range []string{"GitfleetCase", "GitfleetOutcome", "GitfleetCodebase"} {
		if sa[k] == nil {
			t.Errorf("the Web UI has no %s: %v", k, sa)
		}
	}
	commitFiles(t, o, "app", map[string]string{"new.txt": "x\n"})
	if res, children := collect(r); res.ScanCurrent || res.Scan == nil || len(children) != 2 {
		t.Fatalf("re-collection with a new commit: %+v, children %v; want it scanned", res, children)
	}
	// Under other rules the same refs are not current.
	cb := codebase(t, res.CodebaseID)
	if current, err := env.Store.ScanCurrent(ctx, cb.ID, cb.LastRefsDigest, "other rules"); err != nil || current {
		t.Fatalf("scan current under other rules = %t, %v; want false", current, err)
	}
}
