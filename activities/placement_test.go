package activities_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gitfleet/activities"
	"gitfleet/internal/infra/errclass"
	"gitfleet/workflows"
)

// Placement sends Git work to the owner among the live workers; with no
// worker registered (in-process test workers), to the shared Git queue;
// with workers registered but none live — every heartbeat stale at once,
// as after a database outage — it is a Retryable error, not the shared
// queue (the work would be cloned again on any worker, and the children
// would inherit that place); workers silent for a day are not counted.
func TestPlacementWaitsForASilentFleet(t *testing.T) {
	ctx := context.Background()
	queue := fmt.Sprintf("placement-%d", time.Now().UnixNano())
	a := &activities.Activities{Store: env.Store, WorkerOffline: time.Minute}
	place := func() (string, error) {
		return a.PlaceGitWork(ctx, workflows.PlaceGitWorkInput{Location: "https://example.com/acme/app", TaskQueue: queue})
	}
	silent := func(id string, ago time.Duration) {
		t.Helper()
		if _, err := env.Store.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now() - $2 * interval '1 second' WHERE id = $1`,
			id, ago.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM workers WHERE task_queue = $1`, queue) })

	if q, err := place(); err != nil || q != workflows.GitTaskQueue(queue) {
		t.Fatalf("no worker registered: %q, %v; want the shared Git queue", q, err)
	}
	for _, id := range []string{"w1", "w2"} {
		if err := env.Store.RegisterWorker(ctx, queue+"-"+id, queue); err != nil {
			t.Fatal(err)
		}
	}
	q, err := place()
	if err != nil || (q != workflows.WorkerGitQueue(queue, queue+"-w1") && q != workflows.WorkerGitQueue(queue, queue+"-w2")) {
		t.Fatalf("two live workers: %q, %v; want one's queue", q, err)
	}
	// The database was out for 2 minutes: every heartbeat is stale.
	silent(queue+"-w1", 2*time.Minute)
	silent(queue+"-w2", 2*time.Minute)
	if q, err := place(); !isClass(err, errclass.Retryable) {
		t.Fatalf("registered workers, none live: %q, %v; want Retryable", q, err)
	}
	// One is back: it takes the work.
	if err := env.Store.HeartbeatWorker(ctx, queue+"-w2", 0, 0); err != nil {
		t.Fatal(err)
	}
	if q, err := place(); err != nil || q != workflows.WorkerGitQueue(queue, queue+"-w2") {
		t.Fatalf("one worker back: %q, %v; want its queue", q, err)
	}
	// A fleet silent for two days is gone: the shared queue again.
	silent(queue+"-w1", 48*time.Hour)
	silent(queue+"-w2", 48*time.Hour)
	if q, err := place(); err != nil || q != workflows.GitTaskQueue(queue) {
		t.Fatalf("workers silent for two days: %q, %v; want the shared Git queue", q, err)
	}
}
