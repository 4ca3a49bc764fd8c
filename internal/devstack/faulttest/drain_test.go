package faulttest

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/repoid"
	"gitfleet/workflows"
)

// A worker told to stop (SIGTERM) while an activity runs stops polling,
// lets the activity finish and exits 0; the activity's result is in the
// history, and another worker finishes the workflow.
func TestSIGTERMDrainsRunningActivity(t *testing.T) {
	ctx := context.Background()
	owner := fmt.Sprintf("drain%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := fg.CreateRepo(owner, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit(owner, "app", "main", map[string]string{"README.md": "drain\n"}, "first"); err != nil {
		t.Fatal(err)
	}
	// The mirror sync's fetch waits in the forge until the test lets it go.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	remove := fg.AddFault(forge.Fault{Kind: forge.Git, Method: http.MethodPost, Times: 1,
		PathRE: regexp.MustCompile("^/" + owner + "/app(\\.git)?/git-upload-pack$"),
		Before: func(*http.Request) {
			entered <- struct{}{}
			<-release
		}})
	defer remove()

	w := startWorker(t)
	repo := repoid.ID{Host: fg.Host(), Owner: owner, Name: "app"}
	run, err := env.Client.ExecuteWorkflow(ctx, workflows.CollectOptions(repo), workflows.Collect, workflows.CollectInput{Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatalf("the collection never fetched:\n%s", tail(w.logs(), 3000))
	}
	from := len(w.logs())
	w.signal(syscall.SIGTERM)
	w.waitLog(t, from, "worker draining", 30*time.Second)
	close(release)
	select {
	case <-w.proc.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not exit after its activity finished:\n%s", tail(w.logs(), 3000))
	}
	if err := w.proc.Err(); err != nil {
		t.Fatalf("the draining worker exited with %v, want 0:\n%s", err, tail(w.logs(), 3000))
	}

	// The mirror sync the worker was running completed, on its first
	// attempt: nothing failed or timed out for lack of a worker.
	syncs := map[int64]bool{}
	completed := false
	iter := env.Client.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "SyncMirror" {
				syncs[ev.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := ev.GetActivityTaskStartedEventAttributes(); syncs[a.GetScheduledEventId()] && a.GetAttempt() != 1 {
				t.Errorf("the mirror sync ran again (attempt %d)", a.GetAttempt())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			completed = completed || syncs[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			t.Errorf("history has %s: the drained activity did not complete", ev.GetEventType())
		}
	}
	if !completed {
		t.Fatal("the mirror sync did not complete before the worker exited")
	}
	startWorker(t)
	var res workflows.CollectResult
	if err := run.Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
		t.Fatalf("the collection after the drain: %v", err)
	}
}
