package unittest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"gitfleet/activities"
	"gitfleet/internal/domain/repoid"
	"gitfleet/workflows"
)

// accountPages serves an account of n codebases, by name.
func accountPages(n int) func(context.Context, workflows.ListAccountCodebasesInput) (workflows.CachedReposPage, error) {
	return func(_ context.Context, in workflows.ListAccountCodebasesInput) (workflows.CachedReposPage, error) {
		start := 0
		if in.After != "" {
			fmt.Sscanf(in.After, "r%05d", &start)
			start++
		}
		p := workflows.CachedReposPage{Next: in.After}
		for i := start; i < min(n, start+in.Limit); i++ {
			p.Repos = append(p.Repos, repoid.ID{Host: "h", Owner: "acme", Name: fmt.Sprintf("r%05d", i)})
			p.Next = fmt.Sprintf("r%05d", i)
		}
		p.Done = len(p.Repos) < in.Limit
		return p, nil
	}
}

// An account's re-collection starts each of its codebases' Collects once,
// bounded by the running Collects; a change that arrives while it runs
// makes one more pass from the first name, however many arrive, and one
// that does not ends it.
func TestRecollectAccount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		signals int // changes delivered while the run waits for room
	}{
		{"no change meanwhile", 0},
		{"one change meanwhile", 1},
		{"three changes meanwhile", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(workflows.RecollectAccount)
			var sw *activities.Sweeps
			env.RegisterActivity(sw)
			env.OnActivity(sw.ListAccountCodebases, mock.Anything, mock.Anything).Return(accountPages(250))
			// The second count finds no room: the run waits a minute, and
			// the changes arrive while it waits.
			var counts atomic.Int32
			env.OnActivity(sw.RunningCollects, mock.Anything).Return(func(context.Context) (int, error) {
				if counts.Add(1) == 2 {
					return 50, nil
				}
				return 0, nil
			})
			var started atomic.Int32
			env.OnActivity(sw.StartCollect, mock.Anything, mock.Anything).Return(func(context.Context, repoid.ID) error {
				started.Add(1)
				return nil
			})
			for i := range tc.signals {
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(workflows.AccountChangedSignal, workflows.AccountChanged{Delivery: fmt.Sprint("d", i), Event: "installation", Action: "suspend"})
				}, 30*time.Second)
			}
			env.ExecuteWorkflow(workflows.RecollectAccount, workflows.RecollectAccountInput{Host: "h", Account: "acme", MaxRunning: 50, RunningPoll: time.Minute})
			if started.Load() != 250 {
				t.Fatalf("%d Collects started, want each of 250 once", started.Load())
			}
			var p workflows.CollectOrgProgress
			err := env.GetWorkflowResult(&p)
			if tc.signals == 0 {
				if err != nil || !p.Done || p.Listed != 250 || p.Started != 250 || p.Waits != 1 {
					t.Fatalf("progress = %+v, %v; want done after 250 started and one wait", p, err)
				}
				return
			}
			var can *workflow.ContinueAsNewError
			if !errors.As(err, &can) {
				t.Fatalf("ended %+v, %v; want one more pass", p, err)
			}
			var next workflows.RecollectAccountInput
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			if next.After != "" || next.Pending != nil || next.LastPage || next.Again || next.Account != "acme" || next.Progress.Started != 250 {
				t.Fatalf("next pass %+v; want the account from its first name", next)
			}
		})
	}
}
