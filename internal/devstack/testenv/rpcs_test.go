package testenv_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/devstack/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

func beat(ctx context.Context) error {
	activity.RecordHeartbeat(ctx, "one")
	return nil
}

func beating(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: time.Minute})
	return workflow.ExecuteActivity(ctx, beat).Get(ctx, nil)
}

// The heartbeats an activity sends — billed, and in no history — are
// counted at the client the workers share.
func TestRPCsCountsHeartbeats(t *testing.T) {
	const queue = "testenv-rpcs"
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		w.RegisterWorkflow(beating)
		w.RegisterActivity(beat)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	before := env.RPCs("RecordActivityTaskHeartbeat")
	starts := env.RPCs("StartWorkflowExecution")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, beating)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// The SDK sends an activity's first heartbeat at once (later ones it
	// may batch): exactly one here.
	if got := env.RPCs("RecordActivityTaskHeartbeat") - before; got != 1 {
		t.Errorf("heartbeats counted: %d, want 1", got)
	}
	if got := env.RPCs("StartWorkflowExecution") - starts; got != 1 {
		t.Errorf("starts counted: %d, want 1", got)
	}
}
