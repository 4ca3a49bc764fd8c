package workflows_test

import (
	"context"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"gitfleet/internal/domain/identity"
	"gitfleet/workflows"
)

// gitActivities are the activities that do Git work: they run on the Git
// queue, everything else on the workflow's own.
var gitActivities = map[string]bool{"SyncMirror": true, "VerifyCommit": true, "SyncShardMirror": true, "ScanShard": true}

// Git work goes to the Git queue and the bookkeeping stays on the main
// one, so that hours of scans in a queue never hold up a workflow's
// database writes (the two have slots of their own on every worker).
func TestGitWorkRunsOnTheGitQueue(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	mustCollect(t, id(o, "app"), identity.CaseNew)
	commitFiles(t, o, "app", map[string]string{"b.txt": "b\n"})
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil || res.Case != identity.CaseSame {
		t.Fatalf("re-collection: %+v, %v; want case B", res, err)
	}
	recordHistory(t, "collect-git-queue", run.GetID(), run.GetRunID())
	recordHistory(t, "resolve-identity-git-queue", run.GetID()+"/identity", "")
	recordHistory(t, "execute-shard-git-queue", run.GetID()+"/scan", "")

	seen := map[string]bool{}
	for _, wid := range []string{run.GetID(), run.GetID() + "/identity", run.GetID() + "/scan"} {
		it := env.Client.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			a := e.GetActivityTaskScheduledEventAttributes()
			if a == nil {
				continue
			}
			name, queue := a.GetActivityType().GetName(), a.GetTaskQueue().GetName()
			want := workflows.TaskQueue
			if gitActivities[name] {
				want = workflows.GitTaskQueue(workflows.TaskQueue)
			}
			if queue != want {
				t.Errorf("%s: %s scheduled on %q, want %q", wid, name, queue, want)
			}
			seen[name] = true
		}
	}
	for _, name := range []string{"SyncMirror", "VerifyCommit", "ScanShard", "CompleteCollection"} {
		if !seen[name] {
			t.Errorf("the re-collection scheduled no %s (seen %v)", name, seen)
		}
	}
}
