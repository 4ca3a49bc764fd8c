package unittest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"

	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"gitfleet/activities"
	"gitfleet/internal/infra/errclass"
)

func newShardEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *activities.Shards) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ExecuteShard)
	env.RegisterActivity(&activities.Shards{})
	env.RegisterActivity(&activities.Activities{})
	var a *activities.Shards
	env.OnActivity(a.EnsureShard, mock.Anything, mock.Anything).Return(int64(42), nil)
	var placer *activities.Activities
	env.OnActivity(placer.PlaceGitWork, mock.Anything, mock.Anything).Return(workflows.GitTaskQueue(workflows.TaskQueue), nil).Maybe()
	return env, a
}

func claim(fence int64) workflows.Claim {
	return workflows.Claim{Status: shard.Active, Lease: shard.Lease{ShardID: 42, Fence: fence, Owner: "o"}}
}

func TestExecuteShardHappyPath(t *testing.T) {
	env, a := newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.MatchedBy(func(in workflows.AcquireShardInput) bool { return in.Rearm })).Return(claim(3), nil).Once()
	env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("d1", nil).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return w.RefsDigest == "d1" })).
		Return(shard.Receipt{ID: 9, ShardID: 42, Fence: 3, Complete: true}, nil).Once()
	env.OnActivity(a.CheckpointShard, mock.Anything, workflows.CheckpointInput{Lease: claim(3).Lease, ReceiptID: 9}).Return(shard.Done, nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
	var res workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != shard.Done || res.Owners != 1 || res.Receipt == nil || res.Receipt.ID != 9 {
		t.Fatalf("result = %+v", res)
	}
	v, err := env.QueryWorkflow(workflows.PhaseQuery)
	var phase workflows.Phase
	if err != nil || v.Get(&phase) != nil || phase != workflows.PhaseOuterCheckpointed {
		t.Fatalf("phase = %s, %v", phase, err)
	}
	env.AssertExpectations(t)
}

// A run started by a job that synced the mirror already (a Collect) does
// not sync it again: the scan gets the job's refs digest.
func TestExecuteShardUsesTheJobsMirrorSync(t *testing.T) {
	env, a := newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(3), nil).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return w.RefsDigest == "from-collect" })).
		Return(shard.Receipt{ID: 9, ShardID: 42, Fence: 3, Complete: true}, nil).Once()
	env.OnActivity(a.CheckpointShard, mock.Anything, mock.Anything).Return(shard.Done, nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}, RefsDigest: "from-collect"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	env.AssertNotCalled(t, "SyncShardMirror", mock.Anything, mock.Anything)
	env.AssertExpectations(t)
}

// StaleOwner stops the attempt: no checkpoint, no park; a new lease
// finishes the work, and the checkpoint uses the fence of the receipt.
func TestExecuteShardStaleOwnerTakesANewLease(t *testing.T) {
	env, a := newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(3), nil).Once()
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(5), nil).Once()
	env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("d1", nil)
	env.OnActivity(a.ScanShard, mock.Anything, mock.Anything).Return(shard.Receipt{}, permanentOf(errclass.StaleOwner, errclass.ReasonStaleFence)).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.Anything).Return(shard.Receipt{ID: 11, ShardID: 42, Fence: 6, Complete: true}, nil).Once()
	env.OnActivity(a.CheckpointShard, mock.Anything, mock.MatchedBy(func(in workflows.CheckpointInput) bool {
		return in.Lease.Fence == 6 && in.ReceiptID == 11
	})).Return(shard.Done, nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
	var res workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Owners != 2 || res.Status != shard.Done {
		t.Fatalf("result = %+v", res)
	}
	env.AssertNotCalled(t, "ParkShard", mock.Anything, mock.Anything)
	env.AssertExpectations(t)
}

func TestExecuteShardPermanentParks(t *testing.T) {
	env, a := newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(1), nil).Once()
	env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("", permanentOf(errclass.Permanent, errclass.ReasonPermissionDenied)).Once()
	env.OnActivity(a.ParkShard, mock.Anything, workflows.ParkInput{Lease: claim(1).Lease, Reason: errclass.ReasonPermissionDenied}).Return(nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
	res := parkedResult(t, env)
	if res.Status != shard.Parked || res.ParkReason != errclass.ReasonPermissionDenied {
		t.Fatalf("result = %+v", res)
	}
	env.AssertNotCalled(t, "ScanShard", mock.Anything, mock.Anything)
	env.AssertNotCalled(t, "CheckpointShard", mock.Anything, mock.Anything)
	env.AssertExpectations(t)
}

func TestExecuteShardNotActiveDoesNothing(t *testing.T) {
	env, a := newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(workflows.Claim{Status: shard.Parked, ParkReason: "not found"}, nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
	res := parkedResult(t, env)
	if res.Status != shard.Parked || res.Owners != 0 {
		t.Fatalf("result = %+v", res)
	}
	env.AssertNotCalled(t, "SyncShardMirror", mock.Anything, mock.Anything)
}

// Nothing that is not the repository's doing parks its shard: an activity
// whose errors outlasted its budget (a database outage, a host that kept
// failing, a task that waited in the queue), or a Permanent error of the
// database. The run fails with its class and leaves the shard Active for
// the next run.
func TestExecuteShardInfrastructureNeverParks(t *testing.T) {
	for _, tt := range []struct {
		name   string
		failed string
		err    error
		class  errclass.Class
	}{
		{"the scan's retries ran out", "ScanShard",
			temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, errors.New("502 again")), errclass.Retryable},
		{"the checkpoint waited in the queue", "CheckpointShard",
			temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil), errclass.Retryable},
		{"the database rejected a statement", "ScanShard",
			permanentOf(errclass.Permanent, "database rejected the statement"), errclass.Permanent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env, a := newShardEnv(t)
			env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(1), nil).Once()
			env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("d1", nil)
			if tt.failed == "ScanShard" {
				env.OnActivity(a.ScanShard, mock.Anything, mock.Anything).Return(shard.Receipt{}, tt.err).Once()
			} else {
				env.OnActivity(a.ScanShard, mock.Anything, mock.Anything).Return(shard.Receipt{ID: 9, ShardID: 42, Fence: 1, Complete: true}, nil).Once()
				env.OnActivity(a.CheckpointShard, mock.Anything, mock.Anything).Return(shard.Status(""), tt.err).Once()
			}
			env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
			err := env.GetWorkflowError()
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != string(tt.class) || !strings.Contains(app.Message(), "not parked") {
				t.Fatalf("error = %v, want a %s error saying the shard is not parked", err, tt.class)
			}
			env.AssertNotCalled(t, "ParkShard", mock.Anything, mock.Anything)
		})
	}
}

// Every Permanent reason that is the repository's parks, with itself as
// the reason.
func TestExecuteShardRepositoryReasonsPark(t *testing.T) {
	for _, reason := range []string{errclass.ReasonNotFound, errclass.ReasonPermissionDenied, errclass.ReasonCorrupt,
		errclass.ReasonEmptyRepository, errclass.ReasonInvalidInput, errclass.ReasonUnsupported} {
		env, a := newShardEnv(t)
		env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(1), nil).Once()
		env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("", permanentOf(errclass.Permanent, reason)).Once()
		env.OnActivity(a.ParkShard, mock.Anything, workflows.ParkInput{Lease: claim(1).Lease, Reason: reason}).Return(nil).Once()
		env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
		if res := parkedResult(t, env); res.Status != shard.Parked || res.ParkReason != reason {
			t.Fatalf("%s: %+v; want parked for it", reason, res)
		}
	}
}

// A pass that ran out of the worker's budget is continued by the next
// pass of the same run, from what it made durable; a budget the request
// set ends the run after one pass.
func TestExecuteShardContinuesInPasses(t *testing.T) {
	outOfTime := func(id, fence int64) shard.Receipt {
		return shard.Receipt{ID: id, ShardID: 42, Fence: fence, Counts: shard.Counts{BlobsScanned: 8000, OutOfTime: true}}
	}
	env, a := newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.MatchedBy(func(in workflows.AcquireShardInput) bool { return in.Rearm })).Return(claim(3), nil).Once()
	env.OnActivity(a.AcquireShard, mock.Anything, mock.MatchedBy(func(in workflows.AcquireShardInput) bool { return !in.Rearm })).Return(claim(4), nil).Once()
	env.OnActivity(a.AcquireShard, mock.Anything, mock.MatchedBy(func(in workflows.AcquireShardInput) bool { return !in.Rearm })).Return(claim(5), nil).Once()
	env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("d1", nil).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return w.Lease.Fence == 3 && w.MaxDuration == 0 })).
		Return(outOfTime(9, 3), nil).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return w.Lease.Fence == 4 && w.RefsDigest == "d1" })).
		Return(outOfTime(10, 4), nil).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return w.Lease.Fence == 5 })).
		Return(shard.Receipt{ID: 11, ShardID: 42, Fence: 5, Complete: true, Covered: true}, nil).Once()
	env.OnActivity(a.CheckpointShard, mock.Anything, mock.MatchedBy(func(in workflows.CheckpointInput) bool { return in.ReceiptID < 11 })).Return(shard.Active, nil).Twice()
	env.OnActivity(a.CheckpointShard, mock.Anything, workflows.CheckpointInput{Lease: claim(5).Lease, ReceiptID: 11}).Return(shard.Done, nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
	var res workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != shard.Done || res.Passes != 2 || res.Owners != 3 || res.Receipt.ID != 11 {
		t.Fatalf("result = %+v", res)
	}
	env.AssertExpectations(t)

	// The request's own budget: one pass, the next run continues.
	env, a = newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(3), nil).Once()
	env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("d1", nil).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.Anything).Return(outOfTime(9, 3), nil).Once()
	env.OnActivity(a.CheckpointShard, mock.Anything, mock.Anything).Return(shard.Active, nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}, MaxDuration: time.Minute})
	var one workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&one); err != nil || one.Status != shard.Active || one.Passes != 0 {
		t.Fatalf("run with the request's budget: %+v, %v; want one pass, Active", one, err)
	}
	env.AssertExpectations(t)
}

// parkedResult is the result of a run that parked its shard: the run
// fails, Permanent, with the reason as its message and the result in its
// details (workflows.ParkedResult).
func parkedResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.ExecuteShardResult {
	t.Helper()
	err := env.GetWorkflowError()
	res, ok := workflows.ParkedResult(err)
	if !ok {
		t.Fatalf("a run that parked its shard ended with %v, want a failure carrying the result", err)
	}
	if want := fmt.Sprintf("shard %d parked: %s", res.ShardID, res.ParkReason); !strings.Contains(err.Error(), want) {
		t.Fatalf("the run's failure says %q, want %q", err, want)
	}
	return res
}

// Git work its owner does not take within the bound is placed again: the
// scan that waited on a worker that went quiet runs on the next, and
// takes the shard over (a new fence: the attempt it left, if it still
// runs, can no longer write); the run checkpoints under the new fence.
// (The activity's side, the fence and the counts kept, is
// activities.TestAScanPlacedAgainTakesTheShardOver.)
func TestExecuteShardPlacesGitWorkAgain(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ExecuteShard)
	env.RegisterActivity(&activities.Shards{})
	env.RegisterActivity(&activities.Activities{})
	var a *activities.Shards
	var placer *activities.Activities
	env.OnActivity(a.EnsureShard, mock.Anything, mock.Anything).Return(int64(42), nil)
	// w1 is live when the run checks the place it inherited, then goes
	// quiet: the scan waits on w1, and is placed again on w2.
	env.OnActivity(placer.PlaceGitWork, mock.Anything, mock.Anything).Return(workflows.WorkerGitQueue(workflows.TaskQueue, "w1"), nil).Once()
	env.OnActivity(placer.PlaceGitWork, mock.Anything, mock.Anything).Return(workflows.WorkerGitQueue(workflows.TaskQueue, "w2"), nil).Once()
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(3), nil).Once()
	var queues []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "ScanShard" {
			queues = append(queues, info.TaskQueue)
		}
	})
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return !w.TakeOver && w.Lease.Fence == 3 })).
		Return(shard.Receipt{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)).Once()
	// Placed again: it takes the shard over, and its receipt is of the new fence.
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return w.TakeOver && w.Lease.Fence == 3 })).
		Return(shard.Receipt{ID: 9, ShardID: 42, Fence: 4, Complete: true}, nil).Once()
	env.OnActivity(a.CheckpointShard, mock.Anything, workflows.CheckpointInput{Lease: claim(4).Lease, ReceiptID: 9}).Return(shard.Done, nil).Once()
	// Placed on w1 by the job that synced (a Collect), which then went quiet.
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}, RefsDigest: "d1",
		Place: workflows.GitPlace{Location: "https://github.com/acme/app", Queue: workflows.WorkerGitQueue(workflows.TaskQueue, "w1")}})
	var res workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != shard.Done || res.Receipt == nil || res.Receipt.Fence != 4 {
		t.Fatalf("result = %+v", res)
	}
	if want := []string{workflows.WorkerGitQueue(workflows.TaskQueue, "w1"), workflows.WorkerGitQueue(workflows.TaskQueue, "w2")}; fmt.Sprint(queues) != fmt.Sprint(want) {
		t.Fatalf("the scan ran on %v, want %v", queues, want)
	}
	env.AssertExpectations(t)
}

// The place a run inherits from the job that started it (a Collect's
// sync, on w1) is checked again before its first Git work: w1 died
// meanwhile, so the scan goes to the next owner at once, never to w1's
// queue to wait out a placement bound there.
func TestExecuteShardChecksItsInheritedPlace(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ExecuteShard)
	env.RegisterActivity(&activities.Shards{})
	env.RegisterActivity(&activities.Activities{})
	var a *activities.Shards
	var placer *activities.Activities
	env.OnActivity(a.EnsureShard, mock.Anything, mock.Anything).Return(int64(42), nil)
	env.OnActivity(placer.PlaceGitWork, mock.Anything, mock.MatchedBy(func(in workflows.PlaceGitWorkInput) bool {
		return in.Location == "https://github.com/acme/app"
	})).Return(workflows.WorkerGitQueue(workflows.TaskQueue, "w2"), nil).Once()
	var queues []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "ScanShard" {
			queues = append(queues, info.TaskQueue)
		}
	})
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(3), nil).Once()
	env.OnActivity(a.ScanShard, mock.Anything, mock.MatchedBy(func(w workflows.ShardWork) bool { return !w.TakeOver })).
		Return(shard.Receipt{ID: 9, ShardID: 42, Fence: 3, Complete: true}, nil).Once()
	env.OnActivity(a.CheckpointShard, mock.Anything, mock.Anything).Return(shard.Done, nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}, RefsDigest: "d1",
		Place: workflows.GitPlace{Location: "https://github.com/acme/app", Queue: workflows.WorkerGitQueue(workflows.TaskQueue, "w1")}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if want := []string{workflows.WorkerGitQueue(workflows.TaskQueue, "w2")}; fmt.Sprint(queues) != fmt.Sprint(want) {
		t.Fatalf("the scan ran on %v, want %v (the place checked again)", queues, want)
	}
	env.AssertExpectations(t)
}
