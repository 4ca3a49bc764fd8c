package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/blame"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/sweeprange"
)

// SweepScheduleID is the Temporal Schedule that starts RecollectionSweep.
const SweepScheduleID = "recollection-sweep"

// RecollectionSweepInput configures a sweep; zero values mean defaults.
// Continue-as-new carries the position and the counts forward.
type RecollectionSweepInput struct {
	// Now fixes the sweep's clock (tests); zero means the time the sweep
	// started. One sweep decides everything on one clock.
	Now      time.Time `json:"now,omitempty"`
	PageSize int       `json:"pageSize,omitempty"`
	// StartWindow bounds the Collect starts in flight at once.
	StartWindow int `json:"startWindow,omitempty"`
	// StartBatch is how many starts one StartCollects activity makes (the
	// runs with batched starts); zero means DefaultStartBatch.
	StartBatch int `json:"startBatch,omitempty"`

	// MaxActivitiesPerRun is the run's event budget, counted in the
	// activities it schedules (each costs at most six events: its own three
	// and a workflow task's); zero means DefaultActivitiesPerRun.
	MaxActivitiesPerRun int `json:"maxActivitiesPerRun,omitempty"`
	// RemoteTimeout bounds each change check; zero means
	// DefaultRemoteTimeout.
	RemoteTimeout time.Duration `json:"remoteTimeout,omitempty"`
	// MaxRunning bounds the Collect runs running at once, fleet-wide
	// (manual ones too), before the sweep starts more: it waits for room
	// (the runs since GetVersion sweep-bounded-running); zero means
	// DefaultMaxRunning.
	MaxRunning int `json:"maxRunning,omitempty"`
	// RunningPoll is how long a sweep that found no room waits before it
	// counts again; zero means DefaultRunningPoll.
	RunningPoll time.Duration `json:"runningPoll,omitempty"`

	After SweepCursor `json:"after,omitempty"`
	Stats SweepResult `json:"stats,omitempty"`
	// Pending are the changed candidates of the page read last that are not
	// started yet: a run that hands over in the middle of a page passes them
	// on, and the cursor is already past them, so none is started twice.
	Pending []repoid.ID `json:"pending,omitempty"`
	// LastPage: the page read last was the last one.
	LastPage bool `json:"lastPage,omitempty"`
	// Streak is the failures in a row so far (the circuit breaker's count
	// spans the sweep's runs); since GetVersion sweep-host-breaker, of
	// starts only.
	Streak int `json:"streak,omitempty"`
	// Breakers are the change checks' breakers, one a host and one an
	// owner of a host, with failures in a row so far (the runs since
	// GetVersion sweep-host-breaker).
	Breakers blame.Breakers `json:"breakers,omitempty"`
	// HaltedAt is, for each halted breaker, the last candidate of its
	// host (owner) the sweep handled: the candidate whose check tripped it.
	HaltedAt map[string]SweepCursor `json:"haltedAt,omitempty"`
	// Resume is, for each host (owner) the last sweep halted, where it
	// stopped (that sweep's HaltedAt): this sweep takes up its candidates
	// after that point, so a host that halts every sweep is still worked
	// through (the runs since GetVersion sweep-newest-first).
	Resume map[string]SweepCursor `json:"resume,omitempty"`
	// Carry names the state sweeps hand on to the next: a sweep with a
	// Carry starts from the Resume the last sweep of that name left, and
	// leaves its HaltedAt for the next. The scheduled sweep's is its
	// schedule's id (SweepScheduleID); empty: nothing is handed on.
	Carry string `json:"carry,omitempty"`

	// Ranges splits the pass (the runs since GetVersion sweep-ranges): 0
	// or 1, one sweep over the whole fleet, as before; n > 1, n ranges,
	// a child sweep each; SweepRangesPerWorker, one per live worker.
	Ranges int `json:"ranges,omitempty"`
	// Range is this sweep's range of the fleet, set by the pass for its
	// children (nil: the whole fleet).
	Range *sweeprange.Range `json:"range,omitempty"`
}

// CheckHeadsRequest is CheckHeads' input: the batch (CheckHeadsInput, whose
// JSON it extends), the sweep asking, and how long one remote may take.
type CheckHeadsRequest struct {
	CheckHeadsInput
	// Sweep identifies the sweep (its workflow id and first run id, the same
	// across continue-as-new): a check failure is counted once per codebase
	// and sweep, however often the activity is retried. Empty: every time
	// (the runs before the event budget).
	Sweep string `json:"sweep,omitempty"`
	// RemoteTimeout bounds each remote; zero means DefaultRemoteTimeout.
	RemoteTimeout time.Duration `json:"remoteTimeout,omitempty"`
	// PerOwner: the sweep keeps a breaker per owner too, and takes
	// HeadOwnerFailed (the runs since GetVersion sweep-host-breaker).
	PerOwner bool `json:"perOwner,omitempty"`
	// StopHostAfter: a host whose checks fail this many times in a row in
	// the batch (failures never a repository's) is not checked further in
	// it: HeadSkipped (the runs since sweep-host-breaker; 0: check all).
	StopHostAfter int `json:"stopHostAfter,omitempty"`
}

// StartCollectsInput is StartCollects' input: a window of the sweep's
// changed candidates, started in order, Parallel at a time.
type StartCollectsInput struct {
	Repos []repoid.ID `json:"repos"`
	// Parallel bounds the starts in flight at once; zero means 8.
	Parallel int `json:"parallel,omitempty"`
}

// StartResult is how one start of StartCollects ended.
type StartResult string

const (
	// StartStarted: the repository's Collect runs, started by this request
	// or joined (the workflow id is the repository's, the conflict policy
	// use-existing; the SDK's start does not say which of the two it was).
	StartStarted StartResult = "started"
	// StartFailed: the start failed (after a retry if the error was
	// retryable); Reason says why.
	StartFailed StartResult = "failed"
)

// StartOutcome is one repository's outcome in StartCollects' result, in
// input order.
type StartOutcome struct {
	Result StartResult `json:"result"`
	Reason string      `json:"reason,omitempty"`
}

const (
	// DefaultActivitiesPerRun: at most ~6,000 events a run, well under
	// Temporal's 10,240-event warning and 51,200-event limit.
	DefaultActivitiesPerRun = 1000
	// runEventTarget: a run whose history reached this many events hands
	// over at the next boundary, whatever its activity count says.
	runEventTarget = 6000
	// DefaultRemoteTimeout bounds one change check.
	DefaultRemoteTimeout = 30 * time.Second
	// CheckHeadsParallel is how many remotes CheckHeads lists at once.
	CheckHeadsParallel = 8
	// sweepBudgetChange: the runs that count their events, hand over in the
	// middle of a page and check heads under heartbeats.
	sweepBudgetChange = "sweep-event-budget"
	// sweepBatchedStartsChange: the runs that start a window of candidates
	// with one StartCollects instead of a StartCollect each.
	sweepBatchedStartsChange = "sweep-batched-starts"
	// DefaultStartBatch is how many starts one StartCollects makes.
	DefaultStartBatch = 100
	// sweepBoundedRunningChange: the runs that start only while fewer than
	// MaxRunning Collects run.
	sweepBoundedRunningChange = "sweep-bounded-running"
	// sweepUnseenStartedChange: the runs that count as unseen the starts a
	// window made, not the window's size.
	sweepUnseenStartedChange = "sweep-unseen-started"
	// sweepHostBreakerChange: the runs whose change checks trip a breaker
	// per host and per owner (the others go on), and whose starts trip
	// the sweep's.
	sweepHostBreakerChange = "sweep-host-breaker"
	// sweepNewestFirstChange: the runs that page the most recently viewed
	// candidates first and resume halted hosts where the last sweep of
	// their Carry stopped.
	sweepNewestFirstChange = "sweep-newest-first"
	// DefaultMaxRunning is how many Collects may run at once before a
	// sweep waits (GITFLEET_SWEEP_MAX_RUNNING).
	DefaultMaxRunning = 100
	// DefaultRunningPoll is how long a sweep waits for room.
	DefaultRunningPoll = 30 * time.Second
	// StartTimeout bounds one start of StartCollects (each attempt).
	StartTimeout = 20 * time.Second
)

// SweepResult is the sweep's outcome, shown in the Web UI.
type SweepResult struct {
	Considered int `json:"considered"`
	Due        int `json:"due"`
	Unchanged  int `json:"unchanged"`
	Started    int `json:"started"`
	// Failed counts failed change checks and starts; Gone counts
	// repositories whose check failed for good (counted as their failure).
	Failed int `json:"failed"`
	Gone   int `json:"gone"`
	// Waits counts the times the sweep found MaxRunning Collects running
	// and waited for room.
	Waits  int  `json:"waits,omitempty"`
	Halted bool `json:"halted,omitempty"`
	// HaltReason says why a circuit breaker stopped the sweep or a part
	// of it (a host's, an owner's).
	HaltReason string `json:"haltReason,omitempty"`
	// HaltedHosts names the hosts (host/owner: owners) whose breaker
	// halted their part of the sweep; the others went on. The next
	// scheduled sweep resumes each where it stopped.
	HaltedHosts []string `json:"haltedHosts,omitempty"`
	// Skipped counts due candidates left unchecked or unstarted because
	// their host's (owner's) breaker had halted; Deferred those before
	// where the last sweep halted their host (owner), left to the next.
	Skipped  int `json:"skipped,omitempty"`
	Deferred int `json:"deferred,omitempty"`
	// Runs counts the runs of the sweep, of all its ranges' sweeps and the
	// pass's own for a split pass.
	Runs int `json:"runs"`
	// Ranges is how many ranges the pass had (0: not split).
	Ranges int `json:"ranges,omitempty"`
}

func (r SweepResult) String() string {
	s := fmt.Sprintf("considered %d, due %d, unchanged %d, started %d, failed %d, gone %d",
		r.Considered, r.Due, r.Unchanged, r.Started, r.Failed, r.Gone)
	if r.Waits > 0 {
		s += fmt.Sprintf(", waited for room %d times", r.Waits)
	}
	if r.Skipped > 0 || r.Deferred > 0 {
		s += fmt.Sprintf(", skipped %d behind a halted host, deferred %d", r.Skipped, r.Deferred)
	}
	if r.Ranges > 1 {
		s += fmt.Sprintf(" in %d ranges", r.Ranges)
	}
	if r.Halted {
		s = "HALTED (" + r.HaltReason + "): " + s
	}
	return s
}

// breakerLimit: this many failures in a row (checks or starts; since
// sweep-host-breaker, starts, and each host's or owner's checks) halt a
// sweep (a host's or an owner's part of it).
const breakerLimit = blame.BreakerLimit

// pagesPerRun bounds a run's history; the sweep continues as new after it.
const pagesPerRun = 25

// defaults fills in what both versions of the sweep default alike.
func (in *RecollectionSweepInput) defaults(ctx workflow.Context) {
	if in.Now.IsZero() {
		in.Now = workflow.Now(ctx).UTC()
	}
	if in.PageSize <= 0 {
		in.PageSize = 500
	}
	if in.StartWindow <= 0 {
		in.StartWindow = 8
	}
}

// recollectionSweepV0 is the sweep before the event budget: 25 pages a run
// whatever they start, one CheckHeads under apiOptions. Kept, command for
// command, for the runs that started under it (replay).
func recollectionSweepV0(ctx workflow.Context, in RecollectionSweepInput) (SweepResult, error) {
	in.defaults(ctx)
	stats := in.Stats
	stats.Runs++
	failures := 0 // in a row, within this sweep
	fail := func(what string) bool {
		stats.Failed++
		failures++
		if failures >= breakerLimit {
			stats.Halted, stats.HaltReason = true, fmt.Sprintf("%d %s failures in a row", failures, what)
		}
		return stats.Halted
	}

	for pages := 0; ; pages++ {
		if pages == pagesPerRun {
			in.Stats = stats
			return stats, workflow.NewContinueAsNewError(ctx, RecollectionSweep, in)
		}
		var page SweepPage
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityListDue, SweepPageInput{
			After: in.After, Limit: in.PageSize, Now: in.Now,
		}).Get(ctx, &page)
		if err != nil {
			return stats, err
		}
		in.After = page.Next
		stats.Considered += page.Considered
		stats.Due += len(page.Due)

		var outcomes []HeadOutcome
		if len(page.Due) > 0 {
			err := workflow.ExecuteActivity(withOptions(ctx, apiOptions), activityCheckHeads, CheckHeadsInput{
				Repos: page.Due, Now: in.Now,
			}).Get(ctx, &outcomes)
			if err != nil {
				return stats, err
			}
		}
		var changed []repoid.ID
		for i, o := range outcomes {
			switch o {
			case HeadUnchanged:
				stats.Unchanged++
				failures = 0
			case HeadGone:
				stats.Gone++
			case HeadFailed:
				if fail("change check") {
					return finish(ctx, stats)
				}
			default:
				changed = append(changed, page.Due[i].Repo)
				failures = 0
			}
		}
		// Starts go out in windows; their failures count in order.
		for start := 0; start < len(changed); start += in.StartWindow {
			window := changed[start:min(start+in.StartWindow, len(changed))]
			futures := make([]workflow.Future, len(window))
			for i, r := range window {
				futures[i] = workflow.ExecuteActivity(withOptions(ctx, startOptions), activityStartCollect, r)
			}
			for _, f := range futures {
				if err := f.Get(ctx, nil); err != nil {
					if fail("start") {
						return finish(ctx, stats)
					}
					continue
				}
				stats.Started++
				failures = 0
			}
		}
		workflow.SetCurrentDetails(ctx, "Sweeping: "+stats.String())
		if page.Done {
			return finish(ctx, stats)
		}
	}
}

// RecollectionSweep pages through the codebases people look at, decides
// with the decay table which are due, skips those whose head and rules did
// not change, and starts a Collect for the rest (architecture §5). Started by the
// recollection-sweep Schedule (overlap skip: one sweep at a time).
//
// A run keeps its history small: it counts the activities it schedules and
// continues as new before the budget (MaxActivitiesPerRun) would be passed,
// when Temporal suggests it, or after pagesPerRun pages, between two windows
// of starts if need be. It carries the cursor, the changed candidates of the
// current page not yet started, the counts and the breaker's streak. Every
// run makes progress (at least a page or a window) before it may hand over.
//
// Runs since GetVersion sweep-batched-starts start a window of up to
// StartBatch candidates with one StartCollects (one activity, not one a
// repository), StartWindow starts of it in flight at once.
//
// Runs since GetVersion sweep-bounded-running start only while fewer than
// MaxRunning Collects run, fleet-wide (RunningCollects counts them in
// Temporal's visibility store): a window is no larger than the room left,
// and with no room the sweep waits RunningPoll and counts again. A rules
// change that makes every repository due re-scans the fleet MaxRunning at a
// time, not all at once.
//
// Runs since GetVersion sweep-host-breaker count the change checks'
// failures per host and per owner (blame.Breakers, carried across runs):
// three in a row halt that host's (owner's) part of the sweep only, in any
// page order; failed starts still halt the whole sweep. Runs since
// sweep-newest-first page the most recently viewed first and, with a Carry
// (the scheduled sweep's), take up each host (owner) the last sweep halted
// after the candidate it halted on, and leave their own halted hosts for
// the next.
//
// A pass with Ranges (the runs since GetVersion sweep-ranges; the
// scheduled ones) splits the fleet into ranges, a child sweep each
// (sweepPass); each range's sweep is this workflow over its Range.
func RecollectionSweep(ctx workflow.Context, in RecollectionSweepInput) (SweepResult, error) {
	// Only a pass's first run splits (a continued run goes on with its
	// range); the runs recorded before asked no version here.
	if in.Range == nil && in.Ranges != 0 && in.Stats.Runs == 0 && version(ctx, sweepRangesChange, 1) == 1 {
		return sweepPass(ctx, in)
	}
	return recollectionSweep(ctx, in)
}

// recollectionSweep is one sweep: over the whole fleet, or over its Range.
func recollectionSweep(ctx workflow.Context, in RecollectionSweepInput) (SweepResult, error) {
	if workflow.GetVersion(ctx, sweepBudgetChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return recollectionSweepV0(ctx, in)
	}
	in.defaults(ctx)
	if in.MaxActivitiesPerRun <= 0 {
		in.MaxActivitiesPerRun = DefaultActivitiesPerRun
	}
	if in.StartBatch <= 0 {
		in.StartBatch = DefaultStartBatch
	}
	// A run decides once: the windows it starts go out batched, or (runs
	// recorded before) one StartCollect a repository.
	batched := workflow.GetVersion(ctx, sweepBatchedStartsChange, workflow.DefaultVersion, 1) == 1
	bounded := batched && workflow.GetVersion(ctx, sweepBoundedRunningChange, workflow.DefaultVersion, 1) == 1
	// Runs recorded before counted a whole window as unseen, however few
	// it started: a page with two changed repositories left no room for
	// the next, and the sweep waited RunningPoll after every such page.
	countsStarted := bounded && workflow.GetVersion(ctx, sweepUnseenStartedChange, workflow.DefaultVersion, 1) == 1
	// Runs recorded before counted every check failure against one
	// fleet-wide breaker, in page order: a dead host between healthy ones
	// was never halted, one next to them halted them too.
	perHost := countsStarted && version(ctx, sweepHostBreakerChange, 1) == 1
	// Runs recorded before paged the oldest views first: a sweep that
	// halted or ran out of its hour never reached the most viewed.
	newest := perHost && version(ctx, sweepNewestFirstChange, 1) == 1
	if in.MaxRunning <= 0 {
		in.MaxRunning = DefaultMaxRunning
	}
	if in.RunningPoll <= 0 {
		in.RunningPoll = DefaultRunningPoll
	}
	if in.RemoteTimeout <= 0 {
		in.RemoteTimeout = DefaultRemoteTimeout
	}
	info := workflow.GetInfo(ctx)
	sweepID := info.WorkflowExecution.ID + "/" + info.FirstRunID
	stats := in.Stats
	stats.Runs++
	fail := func(what string) bool {
		stats.Failed++
		in.Streak++
		if in.Streak >= breakerLimit {
			stats.Halted, stats.HaltReason = true, fmt.Sprintf("%d %s failures in a row", in.Streak, what)
			return true
		}
		return false
	}
	if perHost {
		if in.Breakers == nil {
			in.Breakers = blame.Breakers{}
		}
		if in.HaltedAt == nil {
			in.HaltedAt = map[string]SweepCursor{}
		}
	}
	scheduled := 0 // activities this run
	// full reports whether scheduling n more activities would take the run
	// past its budget (or Temporal suggests a new run); a run that has not
	// scheduled anything yet always goes on.
	full := func(n int) bool {
		if scheduled == 0 {
			return false
		}
		info := workflow.GetInfo(ctx)
		return scheduled+n > in.MaxActivitiesPerRun || info.GetContinueAsNewSuggested() ||
			info.GetCurrentHistoryLength() >= runEventTarget
	}
	handOver := func() (SweepResult, error) {
		in.Stats = stats
		workflow.SetCurrentDetails(ctx, "Continuing as new: "+stats.String())
		return stats, workflow.NewContinueAsNewError(ctx, RecollectionSweep, in)
	}

	// done ends the sweep; one with a Carry leaves where its halted hosts
	// (owners) stopped for the next.
	done := func() (SweepResult, error) {
		if newest && in.Carry != "" {
			err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activitySaveSweepResume,
				SweepResumeState{Carry: in.Carry, Resume: in.HaltedAt}).Get(ctx, nil)
			if err != nil {
				return stats, err
			}
		}
		return finish(ctx, stats)
	}
	if newest && in.Carry != "" && in.Stats.Runs == 0 && in.Resume == nil {
		// The first run of the sweep: where the last one stopped.
		scheduled++
		var last SweepResumeState
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityLoadSweepResume, in.Carry).Get(ctx, &last); err != nil {
			return stats, err
		}
		in.Resume = last.Resume
	}

	// unseen is the window started since the last count: Temporal's
	// visibility store, which the count reads, is eventually consistent
	// and may not show those runs yet, so the room left counts them too
	// (one window less, if it did). After a wait it shows them.
	unseen := 0
	for pages := 0; ; {
		// Start what the page found changed, a window at a time; starts
		// leave Pending only once they have returned.
		for batched && len(in.Pending) > 0 {
			window := in.StartBatch
			if bounded {
				// A count and a window, or a count and a wait.
				if full(2) {
					return handOver()
				}
				scheduled++
				var running int
				if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityRunningCollects).Get(ctx, &running); err != nil {
					return stats, err
				}
				room := in.MaxRunning - running
				if in.Range != nil && !in.Range.Whole() {
					// The ranges share the room: started at once, they
					// start no more than it together.
					room = sweeprange.Share(room, in.Range.K, in.Range.N, stats.Waits)
				}
				if room -= unseen; room < window {
					window = room
				}
				if window <= 0 {
					stats.Waits++
					workflow.SetCurrentDetails(ctx, fmt.Sprintf("Waiting for room: %d collections running, at most %d; %s",
						running, in.MaxRunning, stats.String()))
					scheduled++ // a timer costs about an activity's events
					if err := workflow.Sleep(ctx, in.RunningPoll); err != nil {
						return stats, err
					}
					unseen = 0
					continue
				}
			} else if full(1) {
				return handOver()
			}
			unseen = window
			if countsStarted {
				unseen = min(window, len(in.Pending))
			}
			if err := startBatch(ctx, &in, window, &stats, fail, &scheduled); err != nil {
				if errors.Is(err, errHalted) {
					return done()
				}
				return stats, err
			}
			workflow.SetCurrentDetails(ctx, "Sweeping: "+stats.String())
		}
		for len(in.Pending) > 0 {
			window := in.Pending[:min(in.StartWindow, len(in.Pending))]
			if full(len(window)) {
				return handOver()
			}
			futures := make([]workflow.Future, len(window))
			for i, r := range window {
				futures[i] = workflow.ExecuteActivity(withOptions(ctx, startOptions), activityStartCollect, r)
			}
			scheduled += len(window)
			in.Pending = in.Pending[len(window):]
			for _, f := range futures {
				if err := f.Get(ctx, nil); err != nil {
					if fail("start") {
						return finish(ctx, stats)
					}
					continue
				}
				stats.Started++
				in.Streak = 0
			}
			workflow.SetCurrentDetails(ctx, "Sweeping: "+stats.String())
		}
		if in.LastPage {
			return done()
		}
		if pages == pagesPerRun || full(2) {
			return handOver()
		}
		pages++

		var page SweepPage
		scheduled++
		listIn := SweepPageInput{After: in.After, Limit: in.PageSize, Now: in.Now, Range: in.Range}
		if newest {
			listIn.Newest, listIn.Resume = true, in.Resume
			listIn.SkipHosts = in.Breakers.HaltedHosts()
		}
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityListDue, listIn).Get(ctx, &page)
		if err != nil {
			return stats, err
		}
		in.After = page.Next
		in.LastPage = page.Done
		stats.Considered += page.Considered
		stats.Due += len(page.Due)
		stats.Deferred += page.Deferred

		due := page.Due
		if perHost {
			// A halted host's (owner's) candidates are not checked.
			due = nil
			for _, r := range page.Due {
				if in.Breakers.Halted(r.Repo.Host, r.Repo.Owner) {
					stats.Skipped++
					continue
				}
				due = append(due, r)
			}
		}
		var outcomes []HeadOutcome
		if len(due) > 0 {
			scheduled++
			err := workflow.ExecuteActivity(withOptions(ctx, checkHeadsOptions(len(due), in.RemoteTimeout)), activityCheckHeads,
				CheckHeadsRequest{CheckHeadsInput: CheckHeadsInput{Repos: due, Now: in.Now}, Sweep: sweepID, RemoteTimeout: in.RemoteTimeout,
					PerOwner: perHost, StopHostAfter: stopHostAfter(perHost)},
			).Get(ctx, &outcomes)
			if err != nil {
				return stats, err
			}
		}
		if perHost {
			last := map[string]DueRepo{} // each host's last candidate checked
			for i, o := range outcomes {
				in.Pending = append(in.Pending, countCheck(&in, &stats, due[i], o, last)...)
			}
			workflow.SetCurrentDetails(ctx, "Sweeping: "+stats.String())
			continue
		}
		for i, o := range outcomes {
			switch o {
			case HeadUnchanged:
				stats.Unchanged++
				in.Streak = 0
			case HeadGone:
				stats.Gone++
			case HeadFailed:
				if fail("change check") {
					return finish(ctx, stats)
				}
			default:
				in.Pending = append(in.Pending, page.Due[i].Repo)
				in.Streak = 0
			}
		}
		workflow.SetCurrentDetails(ctx, "Sweeping: "+stats.String())
	}
}

// countCheck counts one change check's outcome against its host's and its
// owner's breakers (the runs since sweep-host-breaker) and returns the
// repository to start, if any. A check of a host (an owner) halted by an
// earlier one of the page is not counted against it; an unchanged one was
// recorded as checked all the same.
//
// A HeadSkipped (CheckHeads gave the host up after StopHostAfter failures in
// a row, in the order the checks ended) halts the host where it is: after
// its last candidate checked, as the skipped ones are the last of the
// host's in the batch.
func countCheck(in *RecollectionSweepInput, stats *SweepResult, r DueRepo, o HeadOutcome, last map[string]DueRepo) []repoid.ID {
	hostKey, ownerKey := blame.HostKey(r.Repo.Host), blame.OwnerKey(r.Repo.Host, r.Repo.Owner)
	halt := func(key string, at *DueRepo) {
		if at != nil {
			in.HaltedAt[key] = SweepCursor{Viewed: at.Viewed, ID: at.CodebaseID}
		}
		stats.HaltedHosts = append(stats.HaltedHosts, key)
		reason := fmt.Sprintf("%d change check failures in a row on %s", breakerLimit, key)
		if stats.Halted {
			reason = stats.HaltReason + "; " + reason
		}
		stats.Halted, stats.HaltReason = true, reason
	}
	if in.Breakers.Halted(r.Repo.Host, r.Repo.Owner) {
		if o == HeadUnchanged {
			stats.Unchanged++
		} else {
			stats.Skipped++
		}
		return nil
	}
	if o == HeadSkipped {
		stats.Skipped++
		in.Breakers.Halt(hostKey)
		var at *DueRepo
		if prev, ok := last[hostKey]; ok {
			at = &prev
		}
		halt(hostKey, at)
		return nil
	}
	last[hostKey] = r
	switch o {
	case HeadUnchanged:
		stats.Unchanged++
		in.Breakers.Succeed(hostKey, ownerKey)
	case HeadGone:
		stats.Gone++
	case HeadFailed, HeadOwnerFailed:
		stats.Failed++
		key := hostKey
		if o == HeadOwnerFailed {
			key = ownerKey
		}
		if in.Breakers.Fail(key) {
			halt(key, &r)
		}
	default:
		in.Breakers.Succeed(hostKey, ownerKey)
		return []repoid.ID{r.Repo}
	}
	return nil
}

// stopHostAfter is CheckHeads' StopHostAfter: the breaker's limit for the
// runs with a breaker per host.
func stopHostAfter(perHost bool) int {
	if perHost {
		return breakerLimit
	}
	return 0
}

// errHalted: the breaker stopped the sweep in the middle of a window.
var errHalted = errors.New("sweep halted")

// startBatch starts the next window of up to size pending candidates with
// one StartCollects and counts its outcomes in order, as the per-repository
// starts did: a failed start counts against the breaker (errHalted when it
// trips), a started one resets the streak. The window leaves Pending when
// the activity is scheduled: a run hands over only between windows.
func startBatch(ctx workflow.Context, in *RecollectionSweepInput, size int, stats *SweepResult, fail func(string) bool, scheduled *int) error {
	window := in.Pending[:min(size, len(in.Pending))]
	in.Pending = in.Pending[len(window):]
	*scheduled++
	var outcomes []StartOutcome
	err := workflow.ExecuteActivity(withOptions(ctx, startCollectsOptions(len(window), in.StartWindow)), activityStartCollects,
		StartCollectsInput{Repos: window, Parallel: in.StartWindow}).Get(ctx, &outcomes)
	if err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		// The activity failed for good: every start of the window counts
		// as failed, and the breaker decides.
		outcomes = nil
		workflow.GetLogger(ctx).Warn("StartCollects failed", "repositories", len(window), "error", err)
	}
	log := workflow.GetLogger(ctx)
	for i, r := range window {
		o := StartOutcome{Result: StartFailed, Reason: "no outcome"}
		if i < len(outcomes) {
			o = outcomes[i]
		} else if err != nil {
			o.Reason = err.Error()
		}
		if o.Result != StartStarted {
			log.Warn("Could not start a collection", "repository", r.String(), "reason", o.Reason)
			if fail("start") {
				return errHalted
			}
			continue
		}
		stats.Started++
		in.Streak = 0
	}
	return nil
}

// startCollectsOptions size StartCollects to its window: every start may
// take two attempts of StartTimeout, parallel at a time; the activity
// heartbeats after each start, so a worker that died is noticed within two
// starts' time, and the retry resumes after the starts it reported.
func startCollectsOptions(starts, parallel int) workflow.ActivityOptions {
	if parallel <= 0 {
		parallel = 8
	}
	o := apiOptions
	perStart := 2*StartTimeout + 2*time.Second
	rounds := (starts + parallel - 1) / parallel
	o.StartToCloseTimeout = time.Duration(rounds)*perStart + time.Minute
	o.HeartbeatTimeout = perStart + 30*time.Second
	o.ScheduleToCloseTimeout = 3 * o.StartToCloseTimeout
	return o
}

// checkHeadsOptions size CheckHeads to its batch: every remote may take its
// whole timeout, CheckHeadsParallel at a time; the activity heartbeats after
// each remote, so a worker that died is noticed within a remote's time, and
// the retry resumes from the last heartbeat.
func checkHeadsOptions(remotes int, perRemote time.Duration) workflow.ActivityOptions {
	o := apiOptions
	rounds := (remotes + CheckHeadsParallel - 1) / CheckHeadsParallel
	o.StartToCloseTimeout = time.Duration(rounds)*perRemote + time.Minute
	o.HeartbeatTimeout = perRemote + 30*time.Second
	return o
}

// startOptions: a start that fails is the breaker's business, not a retry
// loop's.
var startOptions = func() workflow.ActivityOptions {
	o := apiOptions
	o.ScheduleToCloseTimeout = 2 * time.Minute
	o.RetryPolicy = retryPolicy(2)
	return o
}()

func finish(ctx workflow.Context, stats SweepResult) (SweepResult, error) {
	workflow.SetCurrentDetails(ctx, "Done: "+stats.String())
	workflow.GetLogger(ctx).Info("Sweep finished", "result", stats.String())
	return stats, nil
}
