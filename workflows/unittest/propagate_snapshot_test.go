package unittest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"gitfleet/activities"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/workflows"
)

func newSnapshotEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.PropagateSnapshot)
	env.RegisterActivity(&activities.Snapshots{})
	env.RegisterActivity(&activities.Runner{})
	return env
}

// A propagation that signals keep waking continues as new when Temporal
// suggests it, the signals drained into the next run (whose first round
// answers them) and its counts carried. Before, it looked again for as
// long as signals came, its history growing without bound.
func TestPropagateSnapshotContinuesAsNewWhileSignalsKeepComing(t *testing.T) {
	env := newSnapshotEnv()
	env.OnActivity("LoadSnapshot", mock.Anything, mock.Anything).Return(
		snapshot.Snapshot{Name: "s", Kind: snapshot.KindImage, ImageRef: "r/a:1", Digest: "sha256:0f", State: snapshot.Active}, nil)
	// Each round takes a minute; a signal comes every 30 seconds.
	env.OnActivity("PrepareSnapshotRunners", mock.Anything, mock.Anything).After(time.Minute).Return(workflows.Fleet{Rows: 1}, nil)
	for i := 1; i <= 6; i++ {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.PropagateSignal, nil) }, time.Duration(i)*30*time.Second)
	}
	env.SetContinueAsNewSuggested(true)
	env.ExecuteWorkflow(workflows.PropagateSnapshot, workflows.PropagateSnapshotInput{Name: "s",
		Carried: &workflows.PropagateSnapshotResult{Ready: 2, FromPeers: 10}})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next workflows.PropagateSnapshotInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Name != "s" || next.Carried == nil || next.Carried.Ready != 2 || next.Carried.FromPeers != 10 {
		t.Errorf("continued as %+v (carried %+v)", next, next.Carried)
	}
}

// A build that runs out of its budget leaves its row in error for a build
// (snapshot.BuildFailure: retried by the reconcile a bounded number of
// times) and the snapshot kept in error, and it ran with a build's budget,
// not a pull attempt's. Before, it took the pull's ten minutes an attempt
// and its reason was a pull's timeout, retried for ever.
func TestABuildThatRunsOutOfTimeFailsAsABuild(t *testing.T) {
	env := newSnapshotEnv()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	env.OnActivity("LoadSnapshot", mock.Anything, mock.Anything).Return(
		snapshot.Snapshot{Name: "b", Kind: snapshot.KindRepo, Repo: "h.example/o/r", Commit: commit, State: snapshot.Pending}, nil)
	env.OnActivity("PrepareSnapshotRunners", mock.Anything, mock.Anything).Return(workflows.Fleet{
		Runners: map[string]snapshot.Runner{"r1": {ID: "r1"}},
		ToPull:  []snapshot.Row{{RunnerID: "r1", SnapshotRef: "b", State: snapshot.RowPulling}},
		Rows:    1}, nil)
	var mu sync.Mutex
	var moves []workflows.TransitionRowInput
	var states []workflows.SetSnapshotStateInput
	env.OnActivity("TransitionSnapshotRow", mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.TransitionRowInput) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			moves = append(moves, in)
			return true, nil
		})
	env.OnActivity("SetSnapshotState", mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.SetSnapshotStateInput) error {
		mu.Lock()
		defer mu.Unlock()
		states = append(states, in)
		return nil
	})
	var budget time.Duration
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "BuildSnapshot" {
			budget = info.Deadline.Sub(info.StartedTime)
		}
	})
	env.OnActivity("BuildSnapshot", mock.Anything, mock.Anything).Return(workflows.BuildResult{},
		temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil))
	env.ExecuteWorkflow(workflows.PropagateSnapshot, workflows.PropagateSnapshotInput{Name: "b"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("propagation failed (%v): a build out of time must keep the snapshot for a retry", err)
	}
	if budget < 30*time.Minute {
		t.Errorf("the build ran with %v an attempt, want its own budget (1h)", budget)
	}
	mu.Lock()
	defer mu.Unlock()
	last := moves[len(moves)-1]
	if last.To != snapshot.RowError || last.Reason != snapshot.BuildFailure(snapshot.ReasonBuildTimeout) {
		t.Errorf("row moved %+v, want error %q", last, snapshot.BuildFailure(snapshot.ReasonBuildTimeout))
	}
	if st := states[len(states)-1]; st.State != snapshot.Error {
		t.Errorf("snapshot state %+v, want error (kept for a retry)", st)
	}
}
