package workflows_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/workflows"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
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

// sweepChain runs a sweep to its end in the test environment, one run per
// environment, feeding each continue-as-new's input to the next run. It
// returns the result, the activities each run scheduled and every start
// (all made by StartCollects: a StartCollect fails the test).
func sweepChain(t *testing.T, in workflows.RecollectionSweepInput, cands []workflows.DueRepo, suggest bool) (workflows.SweepResult, []int, map[repoid.ID]int) {
	t.Helper()
	res, perRun, starts, _ := sweepChainBatches(t, in, cands, suggest, nil)
	return res, perRun, starts
}

// sweepChainBatches is sweepChain that also returns the size of every
// StartCollects window; fails, when given, says which starts fail.
func sweepChainBatches(t *testing.T, in workflows.RecollectionSweepInput, cands []workflows.DueRepo, suggest bool,
	fails func(repoid.ID) bool) (workflows.SweepResult, []int, map[repoid.ID]int, []int) {
	t.Helper()
	starts := map[repoid.ID]int{}
	var batches []int
	var perRun []int
	var mu sync.Mutex // activities run concurrently
	for run := 1; ; run++ {
		if run > 1000 {
			t.Fatal("the sweep does not end")
		}
		env, a := newSweepEnv()
		env.SetContinueAsNewSuggested(suggest)
		scheduled := 0
		env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
			mu.Lock()
			scheduled++
			mu.Unlock()
		})
		env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(func(_ context.Context, p workflows.SweepPageInput) (workflows.SweepPage, error) {
			i, _ := slices.BinarySearchFunc(cands, p.After.ID+1, func(c workflows.DueRepo, id int64) int { return cmp.Compare(c.CodebaseID, id) })
			due := cands[i:min(i+p.Limit, len(cands))]
			page := workflows.SweepPage{Next: p.After, Considered: len(due), Due: due, Done: len(due) < p.Limit}
			if len(due) > 0 {
				page.Next = workflows.SweepCursor{ID: due[len(due)-1].CodebaseID}
			}
			return page, nil
		})
		env.OnActivity(a.CheckHeads, mock.Anything, mock.Anything).Return(func(_ context.Context, r workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
			if r.Sweep == "" {
				t.Error("CheckHeads without the sweep's identity")
			}
			out := make([]workflows.HeadOutcome, len(r.Repos))
			for i, d := range r.Repos {
				out[i] = workflows.HeadChanged
				if d.CodebaseID%100 == 0 {
					out[i] = workflows.HeadUnchanged
				}
			}
			return out, nil
		})
		env.OnActivity(a.StartCollect, mock.Anything, mock.Anything).Return(func(_ context.Context, r repoid.ID) error {
			t.Errorf("StartCollect(%s): the sweep starts with StartCollects", r)
			return nil
		})
		env.OnActivity(a.RunningCollects, mock.Anything).Return(0, nil).Maybe()
		env.OnActivity(a.StartCollects, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.StartCollectsInput) ([]workflows.StartOutcome, error) {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, len(in.Repos))
			out := make([]workflows.StartOutcome, len(in.Repos))
			for i, r := range in.Repos {
				if fails != nil && fails(r) {
					out[i] = workflows.StartOutcome{Result: workflows.StartFailed, Reason: "refused"}
					continue
				}
				starts[r]++
				out[i] = workflows.StartOutcome{Result: workflows.StartStarted}
			}
			return out, nil
		})
		env.ExecuteWorkflow(workflows.RecollectionSweep, in)
		perRun = append(perRun, scheduled)
		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); errors.As(err, &can) {
			in = workflows.RecollectionSweepInput{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatal(err)
			}
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		var res workflows.SweepResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		return res, perRun, starts, batches
	}
}

func dueCandidates(n int) []workflows.DueRepo {
	cands := make([]workflows.DueRepo, n)
	for i := range cands {
		cands[i] = workflows.DueRepo{CodebaseID: int64(i + 1), Repo: repoid.ID{Host: "h", Owner: "o", Name: fmt.Sprintf("r%d", i+1)}}
	}
	return cands
}

// After a rule change every candidate is due and changed: the sweep hands
// over to a new run before a run's activities pass the budget, in the middle
// of a page if need be, and starts every changed candidate exactly once,
// a window of StartBatch at a time with one StartCollects.
func TestSweepOfManyDueCandidatesContinuesAsNewAndStartsEachOnce(t *testing.T) {
	const n, budget, batch = 2500, 300, 4
	cands := dueCandidates(n)
	res, perRun, starts, batches := sweepChainBatches(t, workflows.RecollectionSweepInput{Now: time.Now(), PageSize: 500,
		MaxActivitiesPerRun: budget, StartBatch: batch}, cands, false, nil)
	const unchanged = n / 100
	if res.Considered != n || res.Due != n || res.Unchanged != unchanged || res.Started != n-unchanged || res.Halted || res.Runs != len(perRun) {
		t.Fatalf("result = %+v over %d runs, want %d considered and due, %d unchanged, %d started", res, len(perRun), n, unchanged, n-unchanged)
	}
	t.Logf("%d runs, activities per run %v, %d StartCollects", len(perRun), perRun, len(batches))
	total := 0
	for _, k := range perRun {
		total += k
	}
	// Ten pages (ListDue and CheckHeads each) and a StartCollects a window.
	if want := 2*n/500 + (n-unchanged+batch-1)/batch; total < want || len(batches) < want-2*n/500 {
		t.Fatalf("%d activities, %d StartCollects, want at least %d", total, len(batches), want)
	}
	if len(perRun) < total/budget || len(perRun) < 2 {
		t.Fatalf("%d runs for %d activities under a budget of %d", len(perRun), total, budget)
	}
	for i, k := range batches {
		if k < 1 || k > batch {
			t.Errorf("StartCollects %d started %d repositories, want 1 to %d", i+1, k, batch)
		}
	}
	for i, k := range perRun {
		if k > budget {
			t.Errorf("run %d scheduled %d activities, over the budget of %d", i+1, k, budget)
		}
	}
	for _, c := range cands {
		want := 1
		if c.CodebaseID%100 == 0 {
			want = 0
		}
		if starts[c.Repo] != want {
			t.Errorf("%s started %d times, want %d", c.Repo, starts[c.Repo], want)
		}
	}
}

// When Temporal suggests continuing as new from the start, every run still
// makes progress (a page or a window of starts) and the sweep ends.
func TestSweepContinuesAsNewWhenSuggested(t *testing.T) {
	const n = 100
	cands := dueCandidates(n)
	res, perRun, starts := sweepChain(t, workflows.RecollectionSweepInput{Now: time.Now(), PageSize: 30, StartWindow: 10}, cands, true)
	if res.Started != n-1 || res.Due != n || res.Runs != len(perRun) {
		t.Fatalf("result = %+v over %d runs", res, len(perRun))
	}
	t.Logf("%d runs, activities per run %v", len(perRun), perRun)
	// A page (ListDue and CheckHeads) or a window (10 starts) a run.
	for i, k := range perRun {
		if k == 0 || k > 10 {
			t.Errorf("run %d scheduled %d activities", i+1, k)
		}
	}
	if len(starts) != n-1 {
		t.Fatalf("%d repositories started, want %d", len(starts), n-1)
	}
	for r, k := range starts {
		if k != 1 {
			t.Errorf("%s started %d times", r, k)
		}
	}
}

// A StartCollects that reports failures: they count against the breaker in
// order, within a window and across windows, and three in a row halt the
// sweep.
func TestSweepBatchedStartFailuresTripTheBreaker(t *testing.T) {
	cands := dueCandidates(20)
	// r3 fails alone; r6, r7 (one window) and r8 (the next) in a row.
	failing := map[string]bool{"r3": true, "r6": true, "r7": true, "r8": true}
	res, _, starts, batches := sweepChainBatches(t, workflows.RecollectionSweepInput{Now: time.Now(), PageSize: 50, StartBatch: 3},
		cands, false, func(r repoid.ID) bool { return failing[r.Name] })
	// Windows r1–r3, r4–r6, r7–r9: the breaker trips at r8; r9, started in
	// the same window, is not counted (as a window of StartCollect starts
	// in flight when the breaker tripped was not), and nothing after it is
	// started.
	if !res.Halted || res.Failed != 4 || res.Started != 4 {
		t.Fatalf("result = %+v, want halted at r8 with 4 failures and r1, r2, r4, r5 counted started", res)
	}
	if len(starts) != 5 || starts[repoid.ID{Host: "h", Owner: "o", Name: "r9"}] != 1 || len(batches) != 3 {
		t.Fatalf("starts %v in windows %v", starts, batches)
	}
}

// The sweep starts only while fewer than MaxRunning Collects run, fleet-wide:
// each window is no larger than the room RunningCollects leaves, and with no
// room the sweep waits and counts again. (Before, it started every changed
// candidate as fast as StartCollects went: after a rules change, the whole
// fleet's re-scans at once.)
func TestSweepBoundsTheRunningCollects(t *testing.T) {
	const n, maxRunning = 40, 10
	env, a := newSweepEnv()
	cands := dueCandidates(n)
	env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(workflows.SweepPage{Considered: n, Due: cands, Done: true}, nil)
	env.OnActivity(a.CheckHeads, mock.Anything, mock.Anything).Return(func(_ context.Context, r workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
		out := make([]workflows.HeadOutcome, len(r.Repos))
		for i := range out {
			out[i] = workflows.HeadChanged
		}
		return out, nil
	})
	// A fleet of Collects: each run the sweep starts ends after 90 seconds
	// (on the test environment's clock); 4 manual runs hold room throughout.
	const manual = 4
	var mu sync.Mutex
	var ends []time.Time
	peak, counts := 0, 0
	running := func() int {
		now := env.Now()
		k := manual
		for _, e := range ends {
			if now.Before(e) {
				k++
			}
		}
		return k
	}
	env.OnActivity(a.RunningCollects, mock.Anything).Return(func(context.Context) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		counts++
		return running(), nil
	})
	env.OnActivity(a.StartCollects, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.StartCollectsInput) ([]workflows.StartOutcome, error) {
		mu.Lock()
		defer mu.Unlock()
		out := make([]workflows.StartOutcome, len(in.Repos))
		for i := range in.Repos {
			ends = append(ends, env.Now().Add(90*time.Second))
			out[i] = workflows.StartOutcome{Result: workflows.StartStarted}
		}
		peak = max(peak, running())
		return out, nil
	})
	env.ExecuteWorkflow(workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: time.Now(), MaxRunning: maxRunning,
		RunningPoll: time.Minute})
	var res workflows.SweepResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Started != n || res.Halted {
		t.Fatalf("result = %+v, want all %d started", res, n)
	}
	if peak > maxRunning {
		t.Errorf("%d Collects ran at once, over the bound of %d", peak, maxRunning)
	}
	if res.Waits == 0 || counts < n/(maxRunning-manual) {
		t.Errorf("%d waits, %d counts: the sweep did not wait for room", res.Waits, counts)
	}
	t.Logf("%s; at most %d running, %d counts", res, peak, counts)
}

// A window that starts fewer repositories than it could leaves the rest of
// the room to the next: pages with a few changed repositories each go
// through without waiting. (Before, a window counted as unseen all it
// could have started, so the next found no room and waited RunningPoll:
// a sweep of 100,000 repositories waited after every page with a change.)
func TestSweepWaitsOnlyForRunsItStarted(t *testing.T) {
	const pages, changedPerPage = 4, 2
	env, a := newSweepEnv()
	cands := dueCandidates(pages * changedPerPage)
	page := 0
	env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(func(context.Context, workflows.SweepPageInput) (workflows.SweepPage, error) {
		p := workflows.SweepPage{Considered: changedPerPage, Due: cands[page*changedPerPage : (page+1)*changedPerPage], Done: page == pages-1}
		page++
		return p, nil
	})
	env.OnActivity(a.CheckHeads, mock.Anything, mock.Anything).Return(func(_ context.Context, r workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
		out := make([]workflows.HeadOutcome, len(r.Repos))
		for i := range out {
			out[i] = workflows.HeadChanged
		}
		return out, nil
	})
	// The count always lags: it sees none of the runs started.
	env.OnActivity(a.RunningCollects, mock.Anything).Return(0, nil)
	env.OnActivity(a.StartCollects, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.StartCollectsInput) ([]workflows.StartOutcome, error) {
		out := make([]workflows.StartOutcome, len(in.Repos))
		for i := range out {
			out[i] = workflows.StartOutcome{Result: workflows.StartStarted}
		}
		return out, nil
	})
	env.ExecuteWorkflow(workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: time.Now(), MaxRunning: 10})
	var res workflows.SweepResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Started != pages*changedPerPage || res.Waits != 0 {
		t.Fatalf("result = %+v, want all %d started without a wait (%d running at most, of 10)", res, pages*changedPerPage, 2*changedPerPage)
	}
}

// The change checks' breaker is per host (and per owner): a dead host stops
// only its own part of the sweep after three failures in a row of its own,
// whatever the order of the candidates; the healthy host's are all checked
// and started, the dead host's later pages are not even checked. An owner
// refusing gitfleet stops only that owner's. (Before, one fleet-wide count
// in page order: interleaved, the dead host was never halted and all its
// checks failed, 30 s each; adjacent, the sweep halted and the healthy
// host's repositories were never checked.)
func TestSweepBreakerPerHost(t *testing.T) {
	repo := func(host, owner string, i int) workflows.DueRepo {
		return workflows.DueRepo{CodebaseID: int64(i + 1), Viewed: time.Unix(int64(1000-i), 0),
			Repo: repoid.ID{Host: host, Owner: owner, Name: fmt.Sprintf("r%02d", i)}}
	}
	for _, tc := range []struct {
		name   string
		layout func(i int) workflows.DueRepo // candidate i of 40, in sweep order
		failed map[string]workflows.HeadOutcome
		halted string
	}{
		{"interleaved", func(i int) workflows.DueRepo {
			if i%2 == 0 {
				return repo("dead.example", "o", i)
			}
			return repo("fine.example", "o", i)
		}, map[string]workflows.HeadOutcome{"dead.example": workflows.HeadFailed}, "dead.example"},
		{"adjacent", func(i int) workflows.DueRepo {
			if i < 20 {
				return repo("dead.example", "o", i)
			}
			return repo("fine.example", "o", i)
		}, map[string]workflows.HeadOutcome{"dead.example": workflows.HeadFailed}, "dead.example"},
		{"an owner refusing gitfleet", func(i int) workflows.DueRepo {
			if i%2 == 0 {
				return repo("gh.example", "org", i)
			}
			return repo("gh.example", "others", i)
		}, map[string]workflows.HeadOutcome{"gh.example/org": workflows.HeadOwnerFailed}, "gh.example/org"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, a := newSweepEnv()
			var cands []workflows.DueRepo
			for i := range 40 {
				cands = append(cands, tc.layout(i))
			}
			// Pages of 10.
			var skipped [][]string
			env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.SweepPageInput) (workflows.SweepPage, error) {
				skipped = append(skipped, in.SkipHosts)
				start := int(in.After.ID)
				page := workflows.SweepPage{Due: cands[start : start+10], Considered: 10, Next: workflows.SweepCursor{ID: int64(start + 10)}}
				page.Done = start+10 == len(cands)
				return page, nil
			})
			var mu sync.Mutex
			checked := map[string]int{}
			var perOwner bool
			env.OnActivity(a.CheckHeads, mock.Anything, mock.Anything).Return(func(_ context.Context, r workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
				mu.Lock()
				defer mu.Unlock()
				perOwner = r.PerOwner
				out := make([]workflows.HeadOutcome, len(r.Repos))
				for i, d := range r.Repos {
					checked[d.Repo.Host+"/"+d.Repo.Owner]++
					out[i] = workflows.HeadChanged
					for key, o := range tc.failed {
						if key == d.Repo.Host || key == d.Repo.Host+"/"+d.Repo.Owner {
							out[i] = o
						}
					}
				}
				return out, nil
			})
			env.OnActivity(a.RunningCollects, mock.Anything).Return(0, nil)
			started := map[string]int{}
			env.OnActivity(a.StartCollects, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.StartCollectsInput) ([]workflows.StartOutcome, error) {
				mu.Lock()
				defer mu.Unlock()
				out := make([]workflows.StartOutcome, len(in.Repos))
				for i, r := range in.Repos {
					started[r.Host+"/"+r.Owner]++
					out[i] = workflows.StartOutcome{Result: workflows.StartStarted}
				}
				return out, nil
			})
			env.ExecuteWorkflow(workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: time.Now(), PageSize: 10})
			var res workflows.SweepResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			healthy := 0
			for _, c := range cands {
				if _, ok := tc.failed[c.Repo.Host]; ok {
					continue
				}
				if _, ok := tc.failed[c.Repo.Host+"/"+c.Repo.Owner]; ok {
					continue
				}
				healthy++
			}
			if !res.Halted || res.Failed != 3 || res.Started != healthy || !slices.Equal(res.HaltedHosts, []string{tc.halted}) {
				t.Fatalf("result = %+v, want %s halted after 3 failures and all %d healthy started", res, tc.halted, healthy)
			}
			got := 0
			for k, n := range started {
				got += n
				if strings.HasPrefix(k+"/", tc.halted+"/") {
					t.Errorf("%d of the halted %s started", n, k)
				}
			}
			if got != healthy || !perOwner {
				t.Fatalf("started %v (per owner %v), want the %d healthy", started, perOwner, healthy)
			}
			// The halted host's (owner's) later pages were not checked:
			// only the page that tripped it.
			dead := 0
			for k, n := range checked {
				if strings.HasPrefix(k+"/", tc.halted+"/") {
					dead += n
				}
			}
			if dead > 10 || dead < 3 {
				t.Fatalf("the halted %s was checked %d times (%v), want its checks up to the page that halted it", tc.halted, dead, checked)
			}
			// Once a host halted, its candidates are not even read (an
			// owner's are left out as they come).
			wantSkip := []string{}
			if !strings.Contains(tc.halted, "/") {
				wantSkip = []string{tc.halted}
			}
			if last := skipped[len(skipped)-1]; len(skipped) != 4 || !slices.Equal(append([]string{}, last...), wantSkip) || len(skipped[0]) != 0 {
				t.Fatalf("ListDue skipped hosts %v, want none at first and %v at the end", skipped, wantSkip)
			}
		})
	}
}

// A halted host's place carries into the next sweep of the same Carry: the
// sweep reads where the last one stopped, asks ListDue to take each halted
// host up after it, and leaves where the hosts it halts stopped (the
// candidate whose check tripped the breaker). Each sweep pages the most
// recently viewed first.
func TestSweepCarriesHaltedHostsToTheNext(t *testing.T) {
	env, a := newSweepEnv()
	last := map[string]workflows.SweepCursor{"dead.example": {Viewed: time.Unix(900, 0), ID: 7}}
	env.OnActivity(a.LoadSweepResume, mock.Anything, "carry-test").Return(workflows.SweepResumeState{Carry: "carry-test", Resume: last}, nil).Once()
	var listed []workflows.SweepPageInput
	cands := []workflows.DueRepo{
		{CodebaseID: 11, Viewed: time.Unix(800, 0), Repo: repoid.ID{Host: "dead.example", Owner: "o", Name: "a"}},
		{CodebaseID: 12, Viewed: time.Unix(790, 0), Repo: repoid.ID{Host: "dead.example", Owner: "o", Name: "b"}},
		{CodebaseID: 13, Viewed: time.Unix(780, 0), Repo: repoid.ID{Host: "fine.example", Owner: "o", Name: "c"}},
		{CodebaseID: 14, Viewed: time.Unix(770, 0), Repo: repoid.ID{Host: "dead.example", Owner: "o", Name: "d"}},
		{CodebaseID: 15, Viewed: time.Unix(760, 0), Repo: repoid.ID{Host: "dead.example", Owner: "o", Name: "e"}},
	}
	env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.SweepPageInput) (workflows.SweepPage, error) {
		listed = append(listed, in)
		return workflows.SweepPage{Due: cands, Considered: len(cands) + 2, Deferred: 2, Done: true}, nil
	})
	env.OnActivity(a.CheckHeads, mock.Anything, mock.Anything).Return(func(_ context.Context, r workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
		out := make([]workflows.HeadOutcome, len(r.Repos))
		for i, d := range r.Repos {
			out[i] = workflows.HeadFailed
			if d.Repo.Host == "fine.example" {
				out[i] = workflows.HeadChanged
			}
		}
		return out, nil
	})
	env.OnActivity(a.RunningCollects, mock.Anything).Return(0, nil)
	env.OnActivity(a.StartCollects, mock.Anything, mock.Anything).Return([]workflows.StartOutcome{{Result: workflows.StartStarted}}, nil)
	var saved []workflows.SweepResumeState
	env.OnActivity(a.SaveSweepResume, mock.Anything, mock.Anything).Return(func(_ context.Context, s workflows.SweepResumeState) error {
		saved = append(saved, s)
		return nil
	})
	env.ExecuteWorkflow(workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: time.Now(), Carry: "carry-test"})
	var res workflows.SweepResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || !listed[0].Newest || !maps.EqualFunc(listed[0].Resume, last, func(a, b workflows.SweepCursor) bool { return a.ID == b.ID && a.Viewed.Equal(b.Viewed) }) {
		t.Fatalf("ListDue asked %+v, want newest first, resuming %v", listed, last)
	}
	if res.Failed != 3 || res.Started != 1 || res.Skipped != 1 || res.Deferred != 2 || !slices.Equal(res.HaltedHosts, []string{"dead.example"}) {
		t.Fatalf("result = %+v", res)
	}
	want := map[string]workflows.SweepCursor{"dead.example": {Viewed: time.Unix(770, 0), ID: 14}}
	if len(saved) != 1 || saved[0].Carry != "carry-test" || len(saved[0].Resume) != 1 || !saved[0].Resume["dead.example"].Viewed.Equal(want["dead.example"].Viewed) ||
		saved[0].Resume["dead.example"].ID != 14 {
		t.Fatalf("left for the next sweep %+v, want %v", saved, want)
	}
}

// CheckHeads giving a dead host up (HeadSkipped: the rest of the host's
// batch) halts the host after its last candidate checked, even when its
// failures were not three in a row in page order (the checks end in any
// order); the skipped ones are left to the next sweep.
func TestSweepHaltsAHostCheckHeadsGaveUp(t *testing.T) {
	env, a := newSweepEnv()
	r := func(host string, i int) workflows.DueRepo {
		return workflows.DueRepo{CodebaseID: int64(i), Viewed: time.Unix(int64(1000-i), 0), Repo: repoid.ID{Host: host, Owner: "o", Name: fmt.Sprint(i)}}
	}
	due := []workflows.DueRepo{r("dead.example", 1), r("dead.example", 2), r("fine.example", 3), r("dead.example", 4), r("dead.example", 5), r("fine.example", 6), r("dead.example", 7)}
	env.OnActivity(a.ListDue, mock.Anything, mock.Anything).Return(workflows.SweepPage{Due: due, Considered: len(due), Done: true}, nil)
	var req workflows.CheckHeadsRequest
	env.OnActivity(a.CheckHeads, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
		req = in
		return []workflows.HeadOutcome{workflows.HeadFailed, workflows.HeadChanged, workflows.HeadChanged, workflows.HeadFailed,
			workflows.HeadSkipped, workflows.HeadChanged, workflows.HeadSkipped}, nil
	})
	env.OnActivity(a.RunningCollects, mock.Anything).Return(0, nil)
	var started []repoid.ID
	env.OnActivity(a.StartCollects, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.StartCollectsInput) ([]workflows.StartOutcome, error) {
		started = append(started, in.Repos...)
		return slices.Repeat([]workflows.StartOutcome{{Result: workflows.StartStarted}}, len(in.Repos)), nil
	})
	var saved workflows.SweepResumeState
	env.OnActivity(a.LoadSweepResume, mock.Anything, mock.Anything).Return(workflows.SweepResumeState{}, nil)
	env.OnActivity(a.SaveSweepResume, mock.Anything, mock.Anything).Return(func(_ context.Context, s workflows.SweepResumeState) error {
		saved = s
		return nil
	})
	env.ExecuteWorkflow(workflows.RecollectionSweep, workflows.RecollectionSweepInput{Now: time.Now(), Carry: "c"})
	var res workflows.SweepResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if req.StopHostAfter != 3 {
		t.Fatalf("CheckHeads asked to stop a host after %d failures, want 3", req.StopHostAfter)
	}
	// dead.example 2 (changed) was checked before the host was given up.
	if !res.Halted || res.Failed != 2 || res.Skipped != 2 || res.Started != 3 || !slices.Equal(res.HaltedHosts, []string{"dead.example"}) {
		t.Fatalf("result = %+v (started %v)", res, started)
	}
	if at := saved.Resume["dead.example"]; at.ID != 4 {
		t.Fatalf("left for the next sweep %+v, want dead.example after its last checked candidate (4)", saved)
	}
}
