package unittest

import (
	"context"
	"errors"
	"slices"
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
	env.RegisterActivity(&activities.Builds{})
	env.RegisterActivity(&activities.Activities{})
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
// and its reason was a pull's timeout, retried for ever. So on a runner
// (before "build-on-owner") and on the repository's owner worker.
func TestABuildThatRunsOutOfTimeFailsAsABuild(t *testing.T) {
	for _, tc := range []struct {
		name, activity string
		version        workflow.Version
	}{
		{"on a runner", "BuildSnapshot", workflow.DefaultVersion},
		{"on the owner worker", "BuildSnapshotFromMirror", 1},
	} {
		t.Run(tc.name, func(t *testing.T) { buildOutOfTime(t, tc.activity, tc.version) })
	}
}

func buildOutOfTime(t *testing.T, buildActivity string, version workflow.Version) {
	env := newSnapshotEnv()
	env.OnGetVersion("build-on-owner", workflow.DefaultVersion, 1).Return(version)
	env.OnActivity("PlaceGitWork", mock.Anything, mock.Anything).Return("gitfleet:git:w1", nil)
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
		if info.ActivityType.Name == buildActivity {
			budget = info.Deadline.Sub(info.StartedTime)
		}
	})
	env.OnActivity(buildActivity, mock.Anything, mock.Anything).Return(workflows.BuildResult{},
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

// A snapshot from a repository is built on the repository's owner worker
// (the queue PlaceGitWork names), and every runner pulls the built image,
// the first one included: no runner builds. Before "build-on-owner" the
// first runner built it on its own queue.
func TestARepositorySnapshotIsBuiltOnTheOwnerAndPulledByEveryRunner(t *testing.T) {
	env := newSnapshotEnv()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	env.OnActivity("LoadSnapshot", mock.Anything, mock.Anything).Return(
		snapshot.Snapshot{Name: "b", Kind: snapshot.KindRepo, Repo: "h.example/o/r", Commit: commit, State: snapshot.Pending}, nil)
	env.OnActivity("PrepareSnapshotRunners", mock.Anything, mock.Anything).Return(workflows.Fleet{
		Runners: map[string]snapshot.Runner{"r1": {ID: "r1"}, "r2": {ID: "r2"}},
		ToPull:  []snapshot.Row{{RunnerID: "r1", SnapshotRef: "b", State: snapshot.RowPulling}, {RunnerID: "r2", SnapshotRef: "b", State: snapshot.RowPulling}},
		Rows:    2}, nil)
	env.OnActivity("PlaceGitWork", mock.Anything, mock.Anything).Return("gitfleet:git:w1", nil)
	env.OnActivity("BuildSnapshotFromMirror", mock.Anything, mock.Anything).Return(
		workflows.BuildResult{ImageRef: "reg.example/gitfleet/b:0123456789ab", Digest: "sha256:0f"}, nil)
	env.OnActivity("RecordSnapshotImage", mock.Anything, mock.Anything).Return(nil)
	env.OnActivity("SetSnapshotState", mock.Anything, mock.Anything).Return(nil)
	env.OnActivity("ActivateSnapshot", mock.Anything, mock.Anything).Return(true, nil)
	// What the pulls' attempts recorded, summed for the run.
	env.OnActivity("PullBytes", mock.Anything, "default-test-run-id").Return(workflows.PullBytes{Registry: 7, Peers: 3}, nil)
	var mu sync.Mutex
	var moves []workflows.TransitionRowInput
	env.OnActivity("TransitionSnapshotRow", mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.TransitionRowInput) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			moves = append(moves, in)
			return true, nil
		})
	var pulls []workflows.PullInput
	env.OnActivity("PullSnapshot", mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.PullInput) (workflows.PullResult, error) {
			mu.Lock()
			defer mu.Unlock()
			pulls = append(pulls, in)
			return workflows.PullResult{Digest: "sha256:0f"}, nil
		})
	queues := map[string]string{}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		queues[info.ActivityType.Name] = info.TaskQueue
	})
	env.ExecuteWorkflow(workflows.PropagateSnapshot, workflows.PropagateSnapshotInput{Name: "b"})
	var res workflows.PropagateSnapshotResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if q := queues["BuildSnapshotFromMirror"]; q != "gitfleet:git:w1" {
		t.Errorf("the build ran on %q, want the owner's queue gitfleet:git:w1", q)
	}
	if q, ok := queues["BuildSnapshot"]; ok {
		t.Errorf("a runner built the snapshot (on %s)", q)
	}
	if len(pulls) != 2 || res.Ready != 2 || res.Digest != "sha256:0f" {
		t.Errorf("pulls %+v, result %+v: want both runners to pull the built image", pulls, res)
	}
	if res.FromRegistry != 7 || res.FromPeers != 3 {
		t.Errorf("result %+v: want the bytes the pulls' attempts recorded (7 from the registry, 3 from peers)", res)
	}
	for _, m := range moves {
		if m.To == snapshot.RowBuilding || !slices.Equal(m.From, []snapshot.RowState{snapshot.RowPulling}) || m.To != snapshot.RowReady {
			t.Errorf("row moved %+v, want pulling → ready only", m)
		}
	}
}

// A pull that no slot took within the queue bound ends "runner offline" at
// that bound when its runner has stopped heartbeating (the database says
// so): the starter's "ends 'runner offline' within <queue bound>" holds for
// a runner killed mid-pull. Only a runner still heartbeating is asked on
// its admin queue, and one that answers is busy: its pull waits for a slot
// again. Before ("silent-runner-offline"), a dead runner's pull waited a
// second queue bound for its admin queue's silence: ~4m with the defaults.
// The test environment's clock is the workflow's: no test time passes.
func TestAPullOnASilentRunnerEndsOfflineAtTheQueueBound(t *testing.T) {
	const queue = 2 * time.Minute
	for _, tc := range []struct {
		name      string
		version   workflow.Version
		heard     bool
		wantAsked bool              // the admin queue was asked
		wantTo    snapshot.RowState // the row's last move
		wantAfter time.Duration     // when the row moved, from the start
	}{
		{"silent runner", 1, false, false, snapshot.RowError, queue},
		{"busy runner, still heartbeating", 1, true, true, snapshot.RowReady, 3 * queue}, // a pull, the question, a pull
		{"silent runner, before the change", workflow.DefaultVersion, false, true, snapshot.RowError, 2 * queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newSnapshotEnv()
			start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
			env.SetStartTime(start)
			env.OnGetVersion("silent-runner-offline", workflow.DefaultVersion, workflow.Version(1)).Return(tc.version)
			env.OnActivity("LoadSnapshot", mock.Anything, mock.Anything).Return(
				snapshot.Snapshot{Name: "s", Kind: snapshot.KindImage, ImageRef: "r/a:1", Digest: "sha256:0f", State: snapshot.Error}, nil)
			env.OnActivity("PrepareSnapshotRunners", mock.Anything, mock.Anything).Return(workflows.Fleet{
				Runners: map[string]snapshot.Runner{"r1": {ID: "r1"}},
				ToPull:  []snapshot.Row{{RunnerID: "r1", SnapshotRef: "s", State: snapshot.RowPulling, UpdatedAt: start}},
				Rows:    1}, nil)
			env.OnActivity("SetSnapshotState", mock.Anything, mock.Anything).Return(nil)
			env.OnActivity("ActivateSnapshot", mock.Anything, mock.Anything).Return(true, nil)
			env.OnActivity("PullBytes", mock.Anything, mock.Anything).Return(workflows.PullBytes{}, nil)
			var mu sync.Mutex
			var moves []workflows.TransitionRowInput
			var movedAt time.Time
			env.OnActivity("TransitionSnapshotRow", mock.Anything, mock.Anything).Return(
				func(_ context.Context, in workflows.TransitionRowInput) (bool, error) {
					mu.Lock()
					defer mu.Unlock()
					moves = append(moves, in)
					movedAt = env.Now()
					return true, nil
				})
			// Each pull and question takes the queue bound: the first pull
			// is not taken, a second one (the busy runner's) is.
			pulls := 0
			env.OnActivity("PullSnapshot", mock.Anything, mock.Anything).After(queue).Return(
				func(_ context.Context, in workflows.PullInput) (workflows.PullResult, error) {
					mu.Lock()
					defer mu.Unlock()
					if pulls++; pulls == 1 {
						return workflows.PullResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
					}
					return workflows.PullResult{Digest: "sha256:0f"}, nil
				})
			env.OnActivity("RunnerHeard", mock.Anything, mock.Anything).Return(tc.heard, nil)
			asked := false
			env.OnActivity("ListSnapshotImagesPage", mock.Anything, mock.Anything).After(queue).Return(
				func(_ context.Context, in workflows.PageInput) ([]snapshot.Held, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = true
					if tc.heard {
						return nil, nil
					}
					return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
				})
			env.ExecuteWorkflow(workflows.PropagateSnapshot, workflows.PropagateSnapshotInput{Name: "s",
				Timing: workflows.PullTiming{Queue: queue, Fresh: 30 * time.Second}})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if asked != tc.wantAsked {
				t.Errorf("the admin queue asked: %v, want %v", asked, tc.wantAsked)
			}
			if len(moves) == 0 {
				t.Fatal("the row never moved")
			}
			last := moves[len(moves)-1]
			if last.To != tc.wantTo || (tc.wantTo == snapshot.RowError && last.Reason != snapshot.ReasonOffline) {
				t.Errorf("row moved %+v, want %s", last, tc.wantTo)
			}
			// Activities' own bookkeeping takes no workflow time: the moves
			// come at whole queue bounds.
			if after := movedAt.Sub(start); after < tc.wantAfter || after >= tc.wantAfter+queue/2 {
				t.Errorf("the row moved %v after the start, want %v", after, tc.wantAfter)
			}
		})
	}
}
