package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
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

	After SweepCursor `json:"after,omitempty"`
	Stats SweepResult `json:"stats,omitempty"`
}

// SweepResult is the sweep's outcome, shown in the Web UI.
type SweepResult struct {
	Considered int `json:"considered"`
	Due        int `json:"due"`
	Unchanged  int `json:"unchanged"`
	Started    int `json:"started"`
	// Failed counts failed change checks and starts; Gone counts
	// repositories whose check failed for good (counted as their failure).
	Failed int  `json:"failed"`
	Gone   int  `json:"gone"`
	Halted bool `json:"halted,omitempty"`
	// HaltReason says why the circuit breaker stopped the sweep; the next
	// cycle starts fresh.
	HaltReason string `json:"haltReason,omitempty"`
	Runs       int    `json:"runs"`
}

func (r SweepResult) String() string {
	s := fmt.Sprintf("considered %d, due %d, unchanged %d, started %d, failed %d, gone %d",
		r.Considered, r.Due, r.Unchanged, r.Started, r.Failed, r.Gone)
	if r.Halted {
		s = "HALTED (" + r.HaltReason + "): " + s
	}
	return s
}

// breakerLimit: this many failures in a row (checks or starts) halt a sweep.
const breakerLimit = 3

// pagesPerRun bounds a run's history; the sweep continues as new after it.
const pagesPerRun = 25

// RecollectionSweep pages through the codebases people look at, decides
// with the decay table which are due, skips those whose head and rules did
// not change, and starts a Collect for the rest (DESIGN §5). Started by the
// recollection-sweep Schedule (overlap skip: one sweep at a time).
func RecollectionSweep(ctx workflow.Context, in RecollectionSweepInput) (SweepResult, error) {
	if in.Now.IsZero() {
		in.Now = workflow.Now(ctx).UTC()
	}
	if in.PageSize <= 0 {
		in.PageSize = 500
	}
	if in.StartWindow <= 0 {
		in.StartWindow = 8
	}
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
