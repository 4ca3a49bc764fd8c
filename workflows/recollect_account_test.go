package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gitfleet/internal/domain/repoid"
	"gitfleet/workflows"
)

// An account's re-collection, started as a webhook delivery starts it,
// collects each live codebase of the account once more on the real stack,
// no more than MaxRunning at a time.
func TestRecollectAccountCollectsEachCodebase(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	repos := make([]repoid.ID, 3)
	firstRuns := map[string]string{}
	for i := range repos {
		repos[i] = id(o, fmt.Sprintf("r%d", i))
		createRepo(t, o, repos[i].Name, "README.md")
		_, run, err := collectRun(t, repos[i])
		if err != nil {
			t.Fatalf("collect %s: %v", repos[i], err)
		}
		firstRuns[repos[i].Name] = run.GetRunID()
	}
	opts := workflows.RecollectAccountOptions(fg.Host(), o)
	run, err := env.Client.SignalWithStartWorkflow(ctx, opts.ID, workflows.AccountChangedSignal,
		workflows.AccountChanged{Delivery: "d1", Event: "installation", Action: "deleted"}, opts,
		workflows.RecollectAccount, workflows.RecollectAccountInput{Host: fg.Host(), Account: o, MaxRunning: 2, RunningPoll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var p workflows.CollectOrgProgress
	if err := run.Get(ctxTimeout(t, 3*time.Minute), &p); err != nil || !p.Done || p.Listed != 3 || p.Started != 3 {
		t.Fatalf("RecollectAccount: %+v, %v; want each of 3 started once", p, err)
	}
	recordHistory(t, "recollect-account", run.GetID(), run.GetRunID())
	for _, r := range repos {
		latest := currentRun(t, workflows.CollectWorkflowID(r))
		if latest == firstRuns[r.Name] {
			t.Errorf("%s: not collected again", r)
			continue
		}
		var res workflows.CollectResult
		if err := env.Client.GetWorkflow(ctx, workflows.CollectWorkflowID(r), latest).Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
			t.Errorf("%s: the re-collection: %v", r, err)
		}
	}
}
