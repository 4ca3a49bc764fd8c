package unittest

import (
	"errors"

	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"

	"testing"

	enumspb "go.temporal.io/api/enums/v1"
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
	var a *activities.Shards
	env.OnActivity(a.EnsureShard, mock.Anything, mock.Anything).Return(int64(42), nil)
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
	var res workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
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
	var res workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != shard.Parked || res.Owners != 0 {
		t.Fatalf("result = %+v", res)
	}
	env.AssertNotCalled(t, "SyncShardMirror", mock.Anything, mock.Anything)
}

// Retryable errors that outlast the activity's budget park the shard.
func TestExecuteShardTooManyErrorsParks(t *testing.T) {
	env, a := newShardEnv(t)
	env.OnActivity(a.AcquireShard, mock.Anything, mock.Anything).Return(claim(1), nil).Once()
	env.OnActivity(a.SyncShardMirror, mock.Anything, mock.Anything).Return("d1", nil)
	env.OnActivity(a.ScanShard, mock.Anything, mock.Anything).Return(shard.Receipt{},
		temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, errors.New("502 again"))).Once()
	env.OnActivity(a.ParkShard, mock.Anything, workflows.ParkInput{Lease: claim(1).Lease, Reason: "too many errors"}).Return(nil).Once()
	env.ExecuteWorkflow(workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: "k"}})
	var res workflows.ExecuteShardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != shard.Parked || res.ParkReason != "too many errors" {
		t.Fatalf("result = %+v", res)
	}
	env.AssertExpectations(t)
}
