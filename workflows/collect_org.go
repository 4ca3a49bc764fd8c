package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
)

// CollectOrgWorkflowID is the id of the collection of an organization's
// repositories on behalf of a user.
func CollectOrgWorkflowID(userName, org string) string {
	return "collect-org:" + userName + ":" + strings.ToLower(org)
}

// ProgressQuery returns a CollectOrg run's progress.
const ProgressQuery = "progress"

// CollectOrgInput asks for every repository of an organization, as a user
// sees it in the GitHub cache, to be collected. The cache must hold the
// organization (the starter fills it first).
type CollectOrgInput struct {
	UserID          int64  `json:"userId"`
	Org             string `json:"org"`
	IncludeArchived bool   `json:"includeArchived,omitempty"`
	// Window bounds the starts in flight (default 10).
	Window int `json:"window,omitempty"`
	// MaxRunning bounds the Collect runs running at once, fleet-wide (the
	// sweep's and manual ones too), before the organization starts more:
	// it waits for room (the runs since org-bounded-running; the starter
	// gives GITFLEET_SWEEP_MAX_RUNNING); zero means DefaultMaxRunning.
	MaxRunning int `json:"maxRunning,omitempty"`
	// RunningPoll is how long a collection that found no room waits before
	// it counts again; zero means DefaultRunningPoll.
	RunningPoll time.Duration `json:"runningPoll,omitempty"`
	// After and Progress carry a run's state into the next one.
	After    string             `json:"after,omitempty"`
	Progress CollectOrgProgress `json:"progress"`
	// Pending are the repositories of the page read last that are not
	// started yet (After is past them), and LastPage says that page was the
	// last: a run that hands over while it waits for room passes them on.
	Pending  []repoid.ID `json:"pending,omitempty"`
	LastPage bool        `json:"lastPage,omitempty"`
}

// CollectOrgProgress is how far a CollectOrg has come, over all its runs.
type CollectOrgProgress struct {
	Listed  int  `json:"listed"`
	Started int  `json:"started"`
	Failed  int  `json:"failed"`
	Done    bool `json:"done"`
	Runs    int  `json:"runs"`
	// Waits counts the times MaxRunning Collects ran and it waited for room.
	Waits int `json:"waits,omitempty"`
}

func (p CollectOrgProgress) String() string {
	s := fmt.Sprintf("%d repositories listed, %d collections started, %d failed to start", p.Listed, p.Started, p.Failed)
	if p.Waits > 0 {
		s += fmt.Sprintf(", waited for room %d times", p.Waits)
	}
	return s
}

// orgPagesPerRun bounds a run's history (each start is three events); the
// collection continues as new after it, or sooner when Temporal suggests.
const orgPagesPerRun = 10

// orgBoundedRunningChange: the runs that start only while fewer than
// MaxRunning Collects run.
const orgBoundedRunningChange = "org-bounded-running"

// CollectOrg pages through an organization's cached repositories and
// starts a Collect for each, a window at a time. The Collects are the
// ordinary ones: same ids, joined when one is already running.
//
// Runs since org-bounded-running start only while fewer than MaxRunning
// Collects run, fleet-wide, as the sweep does (§5): before each window
// they count the running Collects (RunningCollects), start no more than
// the room left, and with no room wait RunningPoll and count again. A
// 100,000-repository import runs MaxRunning collections at a time, not
// all of them at once.
func CollectOrg(ctx workflow.Context, in CollectOrgInput) (CollectOrgProgress, error) {
	if in.Window <= 0 {
		in.Window = 10
	}
	p := in.Progress
	p.Runs++
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (CollectOrgProgress, error) { return p, nil }); err != nil {
		return p, err
	}
	if version(ctx, orgBoundedRunningChange, 1) == 1 {
		return collectOrgBounded(ctx, in, &p)
	}
	for pages := 0; ; pages++ {
		if pages == orgPagesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			in.Progress = p
			return p, workflow.NewContinueAsNewError(ctx, CollectOrg, in)
		}
		var page CachedReposPage
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityListCachedRepos, ListCachedReposInput{
			UserID: in.UserID, Org: in.Org, IncludeArchived: in.IncludeArchived, After: in.After, Limit: 100,
		}).Get(ctx, &page)
		if err != nil {
			return p, err
		}
		p.Listed += len(page.Repos)
		in.After = page.Next
		for start := 0; start < len(page.Repos); start += in.Window {
			window := page.Repos[start:min(start+in.Window, len(page.Repos))]
			futures := make([]workflow.Future, len(window))
			for i, r := range window {
				futures[i] = workflow.ExecuteActivity(withOptions(ctx, startOptions), activityStartCollect, r)
			}
			for _, f := range futures {
				if err := f.Get(ctx, nil); err != nil {
					p.Failed++
					continue
				}
				p.Started++
			}
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Collecting %s: %s", in.Org, p))
		}
		if page.Done {
			p.Done = true
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Done with %s: %s", in.Org, p))
			return p, nil
		}
	}
}

// collectOrgBounded is CollectOrg since org-bounded-running.
func collectOrgBounded(ctx workflow.Context, in CollectOrgInput, p *CollectOrgProgress) (CollectOrgProgress, error) {
	if in.MaxRunning <= 0 {
		in.MaxRunning = DefaultMaxRunning
	}
	if in.RunningPoll <= 0 {
		in.RunningPoll = DefaultRunningPoll
	}
	handOver := func() (CollectOrgProgress, error) {
		in.Progress = *p
		return *p, workflow.NewContinueAsNewError(ctx, CollectOrg, in)
	}
	// full: the run's history is large enough to hand over (waits add
	// events that the page count does not bound).
	full := func() bool {
		info := workflow.GetInfo(ctx)
		return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= runEventTarget
	}
	starts := roomyStarts{window: in.Window, maxRunning: in.MaxRunning, poll: in.RunningPoll, what: in.Org, p: p}
	for pages := 0; ; {
		rest, err := starts.drain(ctx, in.Pending, full)
		in.Pending = rest
		if err != nil {
			return *p, err
		}
		if len(rest) > 0 {
			return handOver()
		}
		if in.LastPage {
			p.Done = true
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Done with %s: %s", in.Org, p))
			return *p, nil
		}
		if pages == orgPagesPerRun || full() {
			return handOver()
		}
		var page CachedReposPage
		err = workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityListCachedRepos, ListCachedReposInput{
			UserID: in.UserID, Org: in.Org, IncludeArchived: in.IncludeArchived, After: in.After, Limit: 100,
		}).Get(ctx, &page)
		if err != nil {
			return *p, err
		}
		pages++
		p.Listed += len(page.Repos)
		in.After, in.Pending, in.LastPage = page.Next, page.Repos, page.Done
	}
}

// roomyStarts starts Collects a window at a time, only while fewer than
// maxRunning run fleet-wide (as the sweep does, §5), counting them in p;
// with no room it waits poll and counts again.
type roomyStarts struct {
	window, maxRunning int
	poll               time.Duration
	what               string // what the run's details name
	p                  *CollectOrgProgress
	// unseen is what the last window started: the visibility store the
	// count reads may not show those runs yet (as in the sweep).
	unseen int
}

// drain starts every repository of pending and returns the ones left
// when full says the run should hand over first (nil: all started).
func (s *roomyStarts) drain(ctx workflow.Context, pending []repoid.ID, full func() bool) ([]repoid.ID, error) {
	for len(pending) > 0 {
		if full() {
			return pending, nil
		}
		var running int
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityRunningCollects).Get(ctx, &running); err != nil {
			return pending, err
		}
		room := min(s.window, s.maxRunning-running-s.unseen)
		if room <= 0 {
			s.p.Waits++
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Collecting %s, waiting for room: %d collections running, at most %d; %s",
				s.what, running, s.maxRunning, s.p))
			if err := workflow.Sleep(ctx, s.poll); err != nil {
				return pending, err
			}
			s.unseen = 0
			continue
		}
		window := pending[:min(room, len(pending))]
		futures := make([]workflow.Future, len(window))
		for i, r := range window {
			futures[i] = workflow.ExecuteActivity(withOptions(ctx, startOptions), activityStartCollect, r)
		}
		pending = pending[len(window):]
		s.unseen = 0
		for _, f := range futures {
			if err := f.Get(ctx, nil); err != nil {
				s.p.Failed++
				continue
			}
			s.p.Started++
			s.unseen++
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Collecting %s: %s", s.what, s.p))
	}
	return nil, nil
}
