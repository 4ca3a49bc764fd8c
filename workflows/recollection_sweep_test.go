package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gitfleet/workflows"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"gitfleet/activities"
	"gitfleet/internal/domain/repoid"
)

func newSweepEnv() (*testsuite.TestWorkflowEnvironment, *activities.Sweeps) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.RecollectionSweep)
	env.RegisterActivity(&activities.Sweeps{})
	return env, nil
}

// A long sweep continues as new, carrying its position and counts, so its
// history stays small however many codebases there are.
func TestSweepContinuesAsNew(t *testing.T) {
	env, a := newSweepEnv()
	env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.SweepPageInput) (workflows.SweepPage, error) {
		return workflows.SweepPage{Next: workflows.SweepCursor{ID: in.After.ID + int64(in.Limit)}, Considered: in.Limit}, nil
	})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env.ExecuteWorkflow(workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: now, PageSize: 10})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next workflows.RecollectionSweepInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.After.ID != int64(10*workflows.PagesPerRun) || next.Stats.Considered != 10*workflows.PagesPerRun || !next.Now.Equal(now) || next.Stats.Runs != 1 {
		t.Fatalf("continued with %+v", next)
	}
}

func TestSweepBreakerCountsFailuresInARow(t *testing.T) {
	env, a := newSweepEnv()
	due := []workflows.DueRepo{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		due = append(due, workflows.DueRepo{Repo: repoid.ID{Host: "h", Owner: "o", Name: n}})
	}
	env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(workflows.SweepPage{Considered: 6, Due: due, Done: true}, nil)
	// Two failures, a success, then three failures in a row.
	env.OnActivity(a.CheckHeads, mock.Anything, mock.Anything).Return([]workflows.HeadOutcome{
		workflows.HeadFailed, workflows.HeadFailed, workflows.HeadUnchanged,
		workflows.HeadFailed, workflows.HeadFailed, workflows.HeadFailed}, nil)
	env.ExecuteWorkflow(workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: time.Now()})
	var res workflows.SweepResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !res.Halted || res.Failed != 5 || res.Unchanged != 1 || res.Started != 0 {
		t.Fatalf("result = %+v, want halted at the third failure in a row", res)
	}
}
