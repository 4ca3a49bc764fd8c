package unittest

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

func newOrgEnv() (*testsuite.TestWorkflowEnvironment, *activities.GitHub, *activities.Sweeps) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.CollectOrg)
	env.RegisterWorkflow(workflows.RefreshGitHubCache)
	env.RegisterActivity(&activities.GitHub{})
	env.RegisterActivity(&activities.Sweeps{})
	return env, nil, nil
}

// pages serves an organization of n repositories, limit to a page.
func pages(n int) func(context.Context, workflows.ListCachedReposInput) (workflows.CachedReposPage, error) {
	return func(_ context.Context, in workflows.ListCachedReposInput) (workflows.CachedReposPage, error) {
		start := 0
		if in.After != "" {
			fmt.Sscanf(in.After, "acme/r%05d", &start)
			start++
		}
		var p workflows.CachedReposPage
		for i := start; i < min(n, start+in.Limit); i++ {
			p.Repos = append(p.Repos, repoid.ID{Host: "h", Owner: "acme", Name: fmt.Sprintf("r%05d", i)})
			p.Next = fmt.Sprintf("acme/r%05d", i)
		}
		p.Done = start+in.Limit >= n
		return p, nil
	}
}

// Every repository is started once, in windows; failed starts are counted,
// not retried forever.
func TestCollectOrgStartsEveryRepository(t *testing.T) {
	env, g, sw := newOrgEnv()
	env.OnActivity(g.ListCachedRepos, mock.Anything, mock.Anything).Return(pages(250))
	env.OnActivity(sw.RunningCollects, mock.Anything).Return(0, nil)
	var started, inFlight, maxInFlight atomic.Int32
	env.OnActivity(sw.StartCollect, mock.Anything, mock.Anything).Return(func(_ context.Context, r repoid.ID) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		started.Add(1)
		if r.Name == "r00007" {
			return errors.New("start failed")
		}
		return nil
	})
	env.ExecuteWorkflow(workflows.CollectOrg, workflows.CollectOrgInput{UserID: 1, Org: "acme", Window: 10})
	var p workflows.CollectOrgProgress
	if err := env.GetWorkflowResult(&p); err != nil {
		t.Fatal(err)
	}
	if !p.Done || p.Listed != 250 || p.Started != 249 || p.Failed != 1 || started.Load() < 250 {
		t.Fatalf("progress = %+v after %d starts", p, started.Load())
	}
	if m := maxInFlight.Load(); m > 10 {
		t.Fatalf("%d starts in flight, want at most the window of 10", m)
	}
}

// A large organization continues as new, carrying its position and counts.
func TestCollectOrgContinuesAsNew(t *testing.T) {
	env, g, sw := newOrgEnv()
	env.OnActivity(g.ListCachedRepos, mock.Anything, mock.Anything).Return(pages(5000))
	env.OnActivity(sw.RunningCollects, mock.Anything).Return(0, nil)
	env.OnActivity(sw.StartCollect, mock.Anything, mock.Anything).Return(nil)
	env.ExecuteWorkflow(workflows.CollectOrg, workflows.CollectOrgInput{UserID: 1, Org: "acme"})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next workflows.CollectOrgInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Progress.Started != 1000 || next.Progress.Listed != 1000 || next.After != "acme/r00999" || next.Progress.Runs != 1 {
		t.Fatalf("carried over %+v", next)
	}
}

// An organization starts collections only while fewer than MaxRunning run,
// fleet-wide, as the sweep does. The count is a visibility store's: it does
// not show the runs started since the last count yet. A collection ends
// every few counts, slower than room is asked for. Unbounded (the
// runs before org-bounded-running), all 250 would run at once.
func TestCollectOrgBoundsRunningCollections(t *testing.T) {
	for _, tc := range []struct {
		name               string
		window, maxRunning int
		endEvery           int // counts; 0: none ends
		wantWaits          bool
	}{
		{"room for less than a window", 10, 25, 2, true},
		{"a bound below the window", 10, 4, 3, true},
		{"room for every window", 10, 1000, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, g, sw := newOrgEnv()
			env.OnActivity(g.ListCachedRepos, mock.Anything, mock.Anything).Return(pages(250))
			var mu sync.Mutex
			running, sinceCount, counts, most, started := 0, 0, 0, 0, map[string]int{}
			env.OnActivity(sw.RunningCollects, mock.Anything).Return(func(context.Context) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				seen := running - sinceCount
				if counts++; tc.endEvery > 0 && counts%tc.endEvery == 0 && running > 0 {
					running--
				}
				sinceCount = 0
				return seen, nil
			})
			env.OnActivity(sw.StartCollect, mock.Anything, mock.Anything).Return(func(_ context.Context, r repoid.ID) error {
				mu.Lock()
				defer mu.Unlock()
				running++
				sinceCount++
				most = max(most, running)
				started[r.Name]++
				return nil
			})
			env.ExecuteWorkflow(workflows.CollectOrg, workflows.CollectOrgInput{UserID: 1, Org: "acme", Window: tc.window,
				MaxRunning: tc.maxRunning, RunningPoll: time.Second})
			var p workflows.CollectOrgProgress
			if err := env.GetWorkflowResult(&p); err != nil {
				t.Fatal(err)
			}
			if bound := min(tc.maxRunning, 250); most > bound {
				t.Fatalf("%d collections ran at once, over the bound of %d", most, bound)
			}
			if !p.Done || p.Started != 250 || len(started) != 250 || (p.Waits > 0) != tc.wantWaits {
				t.Fatalf("progress = %+v, %d repositories started", p, len(started))
			}
		})
	}
}

// A refresh that fails leaves its error to the caller (the cache is the
// activity's to leave alone).
func TestRefreshGitHubCacheFails(t *testing.T) {
	env, g, _ := newOrgEnv()
	env.OnActivity(g.RefreshGitHubCache, mock.Anything, mock.Anything).Return(workflows.RefreshGitHubCacheResult{}, permanent("permission denied"))
	env.ExecuteWorkflow(workflows.RefreshGitHubCache, workflows.RefreshGitHubCacheInput{UserID: 1})
	if err := env.GetWorkflowError(); err == nil {
		t.Fatal("a failed refresh succeeded")
	}
}
