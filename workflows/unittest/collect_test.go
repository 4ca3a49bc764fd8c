package unittest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"gitfleet/activities"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
)

var (
	repo    = repoid.ID{Host: "github.com", Owner: "alice", Name: "repo"}
	renamed = repoid.ID{Host: "github.com", Owner: "alice", Name: "renamed"}
)

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	return newEnvScanning(t, workflows.ExecuteShardResult{Status: shard.Done})
}

// newEnvScanning is newEnv whose scans end as scan says.
func newEnvScanning(t *testing.T, scan workflows.ExecuteShardResult) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.Collect)
	env.RegisterWorkflow(workflows.ResolveIdentity)
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflow(workflows.ExecuteShard)
	// The scan after identity resolution is workflows.ExecuteShard's business; these
	// tests see it as a child that succeeds.
	var a *activities.Activities
	env.OnActivity(a.CodebaseShard, mock.Anything, mock.Anything).Return(shard.Spec{Key: "codebase:1"}, nil).Maybe()
	env.OnActivity(a.PlaceGitWork, mock.Anything, mock.Anything).Return(workflows.GitTaskQueue(workflows.TaskQueue), nil).Maybe()
	env.OnActivity(a.ScanNeeded, mock.Anything, mock.Anything).Return(true, nil).Maybe()
	env.OnWorkflow(workflows.ExecuteShard, mock.Anything, mock.Anything).Return(scan, nil).Maybe()
	return env
}

func permanent(reason string) error { return permanentOf(errclass.Permanent, reason) }

// permanentOf is an activity error of a non-retryable class, as AppError makes it.
func permanentOf(class errclass.Class, reason string) error {
	return temporal.NewApplicationErrorWithOptions(reason, string(class),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{reason}})
}

func TestCollectVerifiedNeedsNoAPI(t *testing.T) {
	env := newEnv(t)
	var a *activities.Activities
	known := &identity.Codebase{ID: 7, ExternalID: "100", Owner: "alice", Name: "repo", LastCommitSHA: "c1"}
	env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c2", DefaultBranch: "main"}, nil)
	env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{ByName: known}, nil)
	env.OnActivity(a.VerifyCommit, mock.Anything, workflows.VerifyCommitInput{Repo: repo, SHA: "c1"}).Return(true, nil)
	env.OnActivity(a.ApplyIdentity, mock.Anything, mock.MatchedBy(func(in workflows.ApplyIdentityInput) bool {
		return in.API == nil && in.VerifiedSHA == "c1" && in.ExpectByNameID == 7
	})).Return(identity.Outcome{Case: identity.CaseSame, CodebaseID: 7, Owner: "alice", Name: "repo"}, nil)
	env.OnActivity(a.CompleteCollection, mock.Anything, mock.Anything).Return(nil)

	env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.CollectResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Case != identity.CaseSame || res.CodebaseID != 7 || res.Commit != "c2" {
		t.Errorf("result = %+v", res)
	}
	env.AssertNotCalled(t, "LookupRepository", mock.Anything, mock.Anything)
}

// A head that is the codebase's last commit is proof of case B: the
// collection confirms it in one activity (ConfirmCodebase), with no child,
// no fetch and no API request, and when the scan is current that activity
// records the collection too: nothing is scanned, nothing else runs.
func TestCollectConfirmsAnUnchangedRepositoryInOneStep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorded bool // the scan was current
	}{
		{"scan current", true},
		{"scan needed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			var a *activities.Activities
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c1", RefsDigest: "d1"}, nil)
			env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.MatchedBy(func(in workflows.ConfirmCodebaseInput) bool {
				return in.Cloned == repo && in.Head == "c1" && in.RefsDigest == "d1" && in.Key != ""
			})).Return(workflows.ConfirmCodebaseResult{Confirmed: &workflows.ResolveIdentityResult{Case: identity.CaseSame, CodebaseID: 7,
				Owner: "alice", Name: "repo"}, Recorded: tc.recorded}, nil).Once()
			completed := 0
			env.OnActivity(a.CompleteCollection, mock.Anything, mock.Anything).Return(func(context.Context, workflows.CompleteCollectionInput) error {
				completed++
				return nil
			}).Maybe()
			var children []string
			env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
				children = append(children, info.WorkflowType.Name)
			})
			env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo, Trigger: "sweep"})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res workflows.CollectResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Case != identity.CaseSame || res.CodebaseID != 7 || res.ScanCurrent != tc.recorded {
				t.Errorf("result = %+v", res)
			}
			wantChildren, wantCompleted := []string{"ExecuteShard"}, 1
			if tc.recorded {
				wantChildren, wantCompleted = nil, 0
			}
			if !slices.Equal(children, wantChildren) || completed != wantCompleted {
				t.Errorf("children %v, CompleteCollection %d times; want %v and %d", children, completed, wantChildren, wantCompleted)
			}
			for _, name := range []string{"LookupCodebase", "VerifyCommit", "LookupRepository", "ApplyIdentity", "ScanNeeded"} {
				env.AssertNotCalled(t, name, mock.Anything, mock.Anything)
			}
		})
	}
}

func TestCollectRaceStartsOverFromTheClone(t *testing.T) {
	env := newEnv(t)
	var a *activities.Activities
	// First clone still sees the old name; the API already has the new one.
	env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c1"}, nil).Once()
	env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: renamed, Head: "c1"}, nil).Once()
	env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{}, nil)
	env.OnActivity(a.LookupRepository, mock.Anything, mock.Anything).Return(identity.Repository{ExternalID: "100", Owner: "alice", Name: "renamed"}, nil)
	env.OnActivity(a.ApplyIdentity, mock.Anything, mock.MatchedBy(func(in workflows.ApplyIdentityInput) bool { return in.Repo == renamed })).
		Return(identity.Outcome{Case: identity.CaseMoved, CodebaseID: 3, Owner: "alice", Name: "renamed"}, nil).Once()
	env.OnActivity(a.CompleteCollection, mock.Anything, mock.Anything).Return(nil)

	env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.CollectResult
	_ = env.GetWorkflowResult(&res)
	if res.Attempts != 2 || res.Case != identity.CaseMoved || res.Repository != renamed {
		t.Errorf("result = %+v, want 2 attempts ending in D at %v", res, renamed)
	}
}

// The API's 404 for a known codebase's name asks for proof (ExplainRefusal,
// by id, with a token that sees the owner) before the codebase goes stale.
func TestCollectNotFoundMarksStaleAndFailsPermanent(t *testing.T) {
	env := newEnv(t)
	var a *activities.Activities
	known := &identity.Codebase{ID: 9, ExternalID: "100", Owner: "alice", Name: "repo", LastCommitSHA: "c1"}
	env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c5"}, nil)
	env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{ByName: known}, nil)
	env.OnActivity(a.VerifyCommit, mock.Anything, mock.Anything).Return(false, nil)
	env.OnActivity(a.LookupRepository, mock.Anything, repo).Return(identity.Repository{}, permanent(errclass.ReasonNotFound)).Once()
	// Git served the name: the API is asked by the codebase's id
	// (ExplainMissingName), which knows neither it nor the name.
	env.OnActivity(a.ExplainMissingName, mock.Anything, repo).Return(workflows.RefusalResult{Refusal: identity.RefusedGone, CodebaseID: 9,
		Message: "repository github.com/alice/repo no longer exists"}, nil).Once()
	env.OnActivity(a.FailCollection, mock.Anything, mock.MatchedBy(func(in workflows.FailCollectionInput) bool {
		return in.Class == string(errclass.Permanent) && in.Strike && !in.Cancelled
	})).Return(nil).Once()

	env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo})
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) {
		t.Fatalf("error = %v, want a Permanent ApplicationError", err)
	}
	env.AssertExpectations(t)
}

func TestResolveIdentityResolvesAgainWhenRowsChanged(t *testing.T) {
	env := newEnv(t)
	var a *activities.Activities
	env.OnActivity(a.LookupCodebase, mock.Anything, repo).Return(nil, nil).Once()
	env.OnActivity(a.LookupCodebase, mock.Anything, repo).Return(&identity.Codebase{ID: 4, ExternalID: "100", LastCommitSHA: "c1"}, nil).Once()
	env.OnActivity(a.LookupRepository, mock.Anything, repo).Return(identity.Repository{ExternalID: "100", Owner: "alice", Name: "repo"}, nil).Once()
	env.OnActivity(a.ApplyIdentity, mock.Anything, mock.Anything).Return(identity.Outcome{Changed: true}, nil).Once()
	env.OnActivity(a.ApplyIdentity, mock.Anything, mock.MatchedBy(func(in workflows.ApplyIdentityInput) bool { return in.ExpectByNameID == 4 })).
		Return(identity.Outcome{Case: identity.CaseSame, CodebaseID: 4}, nil).Once()

	env.ExecuteWorkflow(workflows.ResolveIdentity, workflows.ResolveIdentityInput{Key: "k", Cloned: repo, Head: "c1"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.ResolveIdentityResult
	_ = env.GetWorkflowResult(&res)
	if res.CodebaseID != 4 || res.APILookups != 1 {
		t.Errorf("result = %+v", res)
	}
	env.AssertExpectations(t)
}

func TestCollectPermanentSyncErrorIsNotRetried(t *testing.T) {
	env := newEnv(t)
	var a *activities.Activities
	calls := 0
	env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(func(_ context.Context, _ repoid.ID) (workflows.SyncMirrorResult, error) {
		calls++
		return workflows.SyncMirrorResult{}, permanent(errclass.ReasonPermissionDenied)
	})
	env.OnActivity(a.FailCollection, mock.Anything, mock.Anything).Return(nil)
	env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo})
	if env.GetWorkflowError() == nil {
		t.Fatal("collection of a forbidden repository succeeded")
	}
	if calls != 1 {
		t.Errorf("SyncMirror ran %d times, want 1 (Permanent is not retried)", calls)
	}
}

func TestCollectRetryableSyncErrorIsRetried(t *testing.T) {
	env := newEnv(t)
	var a *activities.Activities
	calls := 0
	env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(func(_ context.Context, _ repoid.ID) (workflows.SyncMirrorResult, error) {
		calls++
		if calls < 3 {
			return workflows.SyncMirrorResult{}, temporal.NewApplicationError("502", string(errclass.Retryable))
		}
		return workflows.SyncMirrorResult{Cloned: repo, Head: "c1"}, nil
	})
	env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{}, nil)
	env.OnActivity(a.LookupRepository, mock.Anything, repo).Return(identity.Repository{ExternalID: "1", Owner: "alice", Name: "repo"}, nil)
	env.OnActivity(a.ApplyIdentity, mock.Anything, mock.Anything).Return(identity.Outcome{Case: identity.CaseNew, CodebaseID: 1}, nil)
	env.OnActivity(a.CompleteCollection, mock.Anything, mock.Anything).Return(nil)
	env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("SyncMirror ran %d times, want 3", calls)
	}
}

// Only a failure the repository causes counts toward its failures in a row:
// gone, inaccessible or private (ExplainRefusal's verdicts), corrupt (a
// parked scan). An expired token, the database, a refusal nobody could
// explain: recorded, charged to nobody.
func TestCollectStrikesOnlyTheRepositorysOwnFailures(t *testing.T) {
	refusedByGit := permanent(errclass.ReasonPermissionDenied)
	for _, tc := range []struct {
		name   string
		setUp  func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities)
		strike bool
		parked string // the scan's park reason
	}{
		{"gone", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{}, refusedByGit)
			env.OnActivity(a.ExplainRefusal, mock.Anything, repo).Return(workflows.RefusalResult{Refusal: identity.RefusedGone, CodebaseID: 7}, nil)
		}, true, ""},
		{"inaccessible", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{}, refusedByGit)
			env.OnActivity(a.ExplainRefusal, mock.Anything, repo).Return(workflows.RefusalResult{Refusal: identity.RefusedInaccessible, CodebaseID: 7}, nil)
		}, true, ""},
		{"private", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{}, refusedByGit)
			env.OnActivity(a.ExplainRefusal, mock.Anything, repo).Return(workflows.RefusalResult{Refusal: identity.RefusedPrivate, CodebaseID: 7}, nil)
		}, true, ""},
		{"corrupt", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{}, permanent(errclass.ReasonCorrupt))
		}, true, ""},
		{"refused, the API says public (a proxy)", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{}, refusedByGit)
			env.OnActivity(a.ExplainRefusal, mock.Anything, repo).Return(workflows.RefusalResult{Refusal: identity.RefusedDenied, CodebaseID: 7}, nil)
		}, false, ""},
		{"refused, the token expired", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{}, refusedByGit)
			env.OnActivity(a.ExplainRefusal, mock.Anything, repo).Return(workflows.RefusalResult{}, permanent(errclass.ReasonPermissionDenied))
		}, false, ""},
		{"the API token expired", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c1"}, nil)
			env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{}, nil)
			env.OnActivity(a.LookupRepository, mock.Anything, repo).Return(identity.Repository{}, permanent(errclass.ReasonPermissionDenied))
		}, false, ""},
		{"the database rejects the write", func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c1"}, nil)
			env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{}, permanent("database rejected the statement"))
		}, false, ""},
		{name: "a parked scan, out of budget", parked: "too many errors", setUp: func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c1"}, nil)
			env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{}, nil)
			env.OnActivity(a.LookupRepository, mock.Anything, repo).Return(identity.Repository{ExternalID: "1", Owner: "alice", Name: "repo"}, nil)
			env.OnActivity(a.ApplyIdentity, mock.Anything, mock.Anything).Return(identity.Outcome{Case: identity.CaseNew, CodebaseID: 7}, nil)
		}},
		{name: "a parked scan, corrupt", parked: errclass.ReasonCorrupt, strike: true, setUp: func(env *testsuite.TestWorkflowEnvironment, a *activities.Activities) {
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c1"}, nil)
			env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{}, nil)
			env.OnActivity(a.LookupRepository, mock.Anything, repo).Return(identity.Repository{ExternalID: "1", Owner: "alice", Name: "repo"}, nil)
			env.OnActivity(a.ApplyIdentity, mock.Anything, mock.Anything).Return(identity.Outcome{Case: identity.CaseNew, CodebaseID: 7}, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			if tc.parked != "" {
				env = newEnvScanning(t, workflows.ExecuteShardResult{Status: shard.Parked, ParkReason: tc.parked})
			}
			var a *activities.Activities
			tc.setUp(env, a)
			var recorded []workflows.FailCollectionInput
			env.OnActivity(a.FailCollection, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.FailCollectionInput) error {
				recorded = append(recorded, in)
				return nil
			})
			env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo})
			if env.GetWorkflowError() == nil {
				t.Fatal("the collection succeeded")
			}
			if len(recorded) != 1 || recorded[0].Strike != tc.strike || recorded[0].Cancelled {
				t.Fatalf("recorded %+v, want one failure with strike %v", recorded, tc.strike)
			}
		})
	}
}

// A cancelled Collect is a cancel: recorded as cancelled, charged to
// nobody, and the run ends cancelled — whether the cancel comes while an
// activity runs or while the collection pauses before resolving again.
func TestCollectCancelIsACancel(t *testing.T) {
	for _, during := range []string{"sync", "pause"} {
		t.Run(during, func(t *testing.T) {
			env := newEnv(t)
			var a *activities.Activities
			syncs := 0
			env.OnActivity(a.SyncMirror, mock.Anything, repo).Return(func(ctx context.Context, _ repoid.ID) (workflows.SyncMirrorResult, error) {
				syncs++
				if during == "sync" {
					<-ctx.Done() // a long fetch, until the cancel
					return workflows.SyncMirrorResult{}, ctx.Err()
				}
				return workflows.SyncMirrorResult{Cloned: repo, Head: "c1"}, nil
			})
			// Resolution races a rename: the collection pauses a second
			// before syncing again.
			env.OnWorkflow(workflows.ResolveIdentity, mock.Anything, mock.Anything).Return(workflows.ResolveIdentityResult{},
				temporal.NewApplicationError("renamed under the clone", string(errclass.Retryable), errclass.ReasonRace))
			var recorded []workflows.FailCollectionInput
			env.OnActivity(a.FailCollection, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.FailCollectionInput) error {
				recorded = append(recorded, in)
				return nil
			})
			env.RegisterDelayedCallback(env.CancelWorkflow, 500*time.Millisecond)
			env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo})
			err := env.GetWorkflowError()
			var canceled *temporal.CanceledError
			if !errors.As(err, &canceled) {
				t.Fatalf("error = %v, want the cancel", err)
			}
			if len(recorded) != 1 || !recorded[0].Cancelled || recorded[0].Strike {
				t.Fatalf("recorded %+v, want one cancelled collection, no strike", recorded)
			}
			if syncs != 1 {
				t.Errorf("%d syncs, want 1: nothing runs after the cancel", syncs)
			}
		})
	}
}

// A fetch by SHA that waits in its owner's queue past its own bound (5
// minutes) gives way to the API at once: it is not placed again, as Git
// work without a fallback is (12 placements, an hour, before).
func TestResolveIdentityVerifyGivesWayToTheAPI(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ResolveIdentity)
	env.RegisterActivity(&activities.Activities{})
	var a *activities.Activities
	verifies, placements := 0, 0
	env.OnActivity(a.PlaceGitWork, mock.Anything, mock.Anything).Return(func(context.Context, workflows.PlaceGitWorkInput) (string, error) {
		placements++
		return workflows.WorkerGitQueue(workflows.TaskQueue, "w1"), nil
	}).Maybe()
	env.OnActivity(a.LookupCodebase, mock.Anything, repo).Return(&identity.Codebase{ID: 4, ExternalID: "100", LastCommitSHA: "c1"}, nil).Once()
	env.OnActivity(a.VerifyCommit, mock.Anything, mock.Anything).Return(func(context.Context, workflows.VerifyCommitInput) (bool, error) {
		verifies++
		return false, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
	})
	env.OnActivity(a.LookupRepository, mock.Anything, repo).Return(identity.Repository{ExternalID: "100", Owner: "alice", Name: "repo"}, nil).Once()
	env.OnActivity(a.ApplyIdentity, mock.Anything, mock.MatchedBy(func(in workflows.ApplyIdentityInput) bool {
		return in.API != nil && in.VerifiedSHA == ""
	})).Return(identity.Outcome{Case: identity.CaseSame, CodebaseID: 4}, nil).Once()

	env.ExecuteWorkflow(workflows.ResolveIdentity, workflows.ResolveIdentityInput{Key: "k", Cloned: repo, Head: "c2",
		Place: workflows.GitPlace{Repo: &repo, Queue: workflows.WorkerGitQueue(workflows.TaskQueue, "w1")}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if verifies != 1 || placements != 0 {
		t.Fatalf("the fetch by SHA ran %d times after %d placements; want once, then the API", verifies, placements)
	}
	env.AssertExpectations(t)
}

// Pushes that arrive while a collection runs make one more run, however
// many they are; the pushes that started it (or met it before its sync)
// make none: its sync fetches after them.
func TestCollectCoalescesPushes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		before, during int
		followUp       bool
	}{
		{"no push", 0, 0, false},
		{"pushes before the sync", 3, 0, false},
		{"a burst during the sync", 1, 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			var a *activities.Activities
			env.OnActivity(a.SyncMirror, mock.Anything, repo).After(time.Minute).
				Return(workflows.SyncMirrorResult{Cloned: repo, Head: "c1", RefsDigest: "d1"}, nil)
			env.OnActivity(a.ConfirmCodebase, mock.Anything, mock.Anything).Return(workflows.ConfirmCodebaseResult{
				Confirmed: &workflows.ResolveIdentityResult{Case: identity.CaseSame, CodebaseID: 7, Owner: "alice", Name: "repo"},
				Recorded:  true}, nil)
			push := func(n int) {
				for i := range n {
					env.SignalWorkflow(workflows.PushedSignal, workflows.Pushed{Delivery: fmt.Sprint("d", i), Event: "push"})
				}
			}
			env.RegisterDelayedCallback(func() { push(tc.before) }, 0)
			env.RegisterDelayedCallback(func() { push(tc.during) }, 30*time.Second)
			env.ExecuteWorkflow(workflows.Collect, workflows.CollectInput{Repo: repo, Trigger: workflows.TriggerPush})

			err := env.GetWorkflowError()
			var next *workflow.ContinueAsNewError
			if got := errors.As(err, &next); got != tc.followUp {
				t.Fatalf("continued as new: %t (%v), want %t", got, err, tc.followUp)
			}
			if !tc.followUp {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var in workflows.CollectInput
			if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &in); err != nil || in.Repo != repo || in.Trigger != workflows.TriggerPush {
				t.Errorf("the follow-up collects %+v (%v), want %s on a push", in, err, repo)
			}
		})
	}
}
