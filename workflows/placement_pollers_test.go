package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/placement"
	"gitfleet/internal/infra/errclass"
	"gitfleet/workflows"
)

// A live row in workers whose queue nobody polls attracts no Git work
// (§11, "Who may place work"): placement asks the Temporal server for the
// owner's queue's pollers and passes an unpolled one over, so the
// repository goes to the worker that is there; with only the forged row
// live, placement waits (Retryable) rather than send work nowhere. Before
// the check, the forged row took every repository it owns by rendezvous
// hashing (half of them, against one real worker).
func TestPlacementPassesOverUnpolledQueues(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	queue := "gitfleet-pollers-" + o
	forged, real := o+"-forged", o+"-real"
	t.Cleanup(func() {
		_, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE task_queue = $1`, queue)
	})
	for _, id := range []string{forged, real} {
		if err := env.Store.RegisterWorker(ctx, id, queue); err != nil {
			t.Fatal(err)
		}
	}
	w := worker.New(env.Client, workflows.WorkerGitQueue(queue, real), worker.Options{DisableWorkflowWorker: true})
	w.RegisterActivity(&activities.Activities{Store: env.Store})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	poll.Until(t, "the real worker's poll reaches Temporal", time.Minute, func() (bool, string) {
		d, err := env.Client.DescribeTaskQueue(ctx, workflows.WorkerGitQueue(queue, real), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		return err == nil && len(d.GetPollers()) > 0, fmt.Sprint(d, err)
	})

	// Repositories the forged row owns among the two.
	var locations []string
	for i := 0; len(locations) < 5; i++ {
		loc := fmt.Sprintf("https://example.com/%s/r%d", o, i)
		if placement.Owner(placement.URLKey(loc), []string{forged, real}) == forged {
			locations = append(locations, loc)
		}
	}
	a := &activities.Activities{Store: env.Store, WorkerOffline: time.Minute, Pollers: activities.NewPollerCheck(env.Client)}
	for _, loc := range locations {
		q, err := a.PlaceGitWork(ctx, workflows.PlaceGitWorkInput{Location: loc, TaskQueue: queue})
		if err != nil || q != workflows.WorkerGitQueue(queue, real) {
			t.Errorf("%s, owned by the unpolled row: placed on %q, %v; want the polled worker's queue", loc, q, err)
		}
	}

	// The real worker silent: the forged row alone is live.
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now() - interval '2 minutes' WHERE id = $1`, real); err != nil {
		t.Fatal(err)
	}
	q, err := a.PlaceGitWork(ctx, workflows.PlaceGitWorkInput{Location: locations[0], TaskQueue: queue})
	var app interface{ Type() string }
	if !errors.As(err, &app) || app.Type() != string(errclass.Retryable) {
		t.Errorf("only the unpolled row live: placed on %q, %v; want Retryable (no live worker)", q, err)
	}
}
