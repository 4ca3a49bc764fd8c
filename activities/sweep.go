package activities

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"gitfleet/workflows"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
)

// HeadChecker answers the sweep's cheap change check.
type HeadChecker interface {
	Head(ctx context.Context, cloneURL string) (string, error)
}

// LsRemote checks heads with go-git's reference advertisement.
type LsRemote struct{}

// Head lists the remote's HEAD.
func (LsRemote) Head(ctx context.Context, cloneURL string) (string, error) {
	return mirror.Head(ctx, cloneURL)
}

// Sweeps are the re-collection sweep's activities (architecture §5).
type Sweeps struct {
	Store  *store.Store
	Client client.Client
	Hosts  vcs.Hosts
	Heads  HeadChecker
	// Policy is the scanner's current rule set: a repository scanned under
	// another is changed even when its head is not.
	Policy string
	Decay  decay.Table
	Log    *zap.Logger
}

// ListDue reads a page of candidates and decides, with the decay table,
// which are due.
func (s *Sweeps) ListDue(ctx context.Context, in workflows.SweepPageInput) (workflows.SweepPage, error) {
	table := s.Decay
	if table == nil {
		table = decay.Default
	}
	cands, err := s.Store.SweepCandidates(ctx, store.SweepCursor(in.After), in.Now.Add(-table.Horizon()), in.Now, in.Limit)
	if err != nil {
		return workflows.SweepPage{}, AppError(err)
	}
	page := workflows.SweepPage{Next: in.After, Considered: len(cands), Done: len(cands) < in.Limit}
	for _, c := range cands {
		page.Next = workflows.SweepCursor{Viewed: *c.LastViewedAt, ID: c.ID}
		due, _ := table.Decide(decay.Candidate{LastViewed: c.LastViewedAt, LastCompleted: c.LastCompletedAt,
			LastChecked: c.LastCheckedAt, ConsecutiveFailures: c.ConsecutiveFailures}, in.Now)
		if due {
			page.Due = append(page.Due, workflows.DueRepo{CodebaseID: c.ID, Repo: c.Repo, LastCommit: c.LastCommitSHA,
				PolicyCurrent: c.ScanPolicy != "" && c.ScanPolicy == s.Policy})
		}
	}
	return page, nil
}

// CheckHeadsProgress is CheckHeads' heartbeat: the outcomes so far, in
// input order ("" for a remote not checked yet), and their counts. A retry
// resumes from it: a remote with an outcome is not checked again.
type CheckHeadsProgress struct {
	// Last is the index of the remote checked last (-1: none yet).
	Last      int                     `json:"last"`
	Checked   int                     `json:"checked"`
	Changed   int                     `json:"changed"`
	Unchanged int                     `json:"unchanged"`
	Failed    int                     `json:"failed"`
	Gone      int                     `json:"gone"`
	Outcomes  []workflows.HeadOutcome `json:"outcomes"`
}

func (p *CheckHeadsProgress) add(i int, o workflows.HeadOutcome) {
	p.Outcomes[i] = o
	p.Last = i
	p.Checked++
	switch o {
	case workflows.HeadChanged:
		p.Changed++
	case workflows.HeadUnchanged:
		p.Unchanged++
	case workflows.HeadFailed:
		p.Failed++
	case workflows.HeadGone:
		p.Gone++
	}
}

// CheckHeads lists each due repository's head (no clone, no API request),
// workflows.CheckHeadsParallel at a time, each bounded by the request's
// RemoteTimeout: a remote that hangs fails alone. It heartbeats after each
// remote with the progress so far, and a retry resumes from the last
// heartbeat. An unchanged head under unchanged rules is recorded as
// checked; a repository that is gone or private counts a failure, once per
// sweep. The outcomes come back in input order, so the workflow can tell
// consecutive failures.
func (s *Sweeps) CheckHeads(ctx context.Context, in workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
	p := resumed(ctx, CheckHeadsProgress{Last: -1, Outcomes: make([]workflows.HeadOutcome, len(in.Repos))},
		func(prev CheckHeadsProgress) bool { return len(prev.Outcomes) == len(in.Repos) })
	timeout := in.RemoteTimeout
	if timeout <= 0 {
		timeout = workflows.DefaultRemoteTimeout
	}
	var mu sync.Mutex
	err := inParallel(ctx, len(in.Repos), workflows.CheckHeadsParallel, func(i int) bool { return p.Outcomes[i] == "" },
		func(i int) error {
			r := in.Repos[i]
			o := s.checkHead(ctx, r, timeout)
			if ctx.Err() != nil {
				return nil // the attempt is over: its outcome may be its own doing
			}
			if o == workflows.HeadGone {
				if _, err := s.Store.RecordCheckFailure(ctx, r.CodebaseID, in.Sweep, in.Now); err != nil {
					return err
				}
			}
			mu.Lock()
			defer mu.Unlock()
			p.add(i, o)
			progress := p
			progress.Outcomes = slices.Clone(p.Outcomes)
			activity.RecordHeartbeat(ctx, progress)
			return nil
		})
	if err = cmp.Or(err, ctx.Err()); err != nil {
		return nil, AppError(err)
	}
	var unchanged []int64
	for i, r := range in.Repos {
		if p.Outcomes[i] == workflows.HeadUnchanged {
			unchanged = append(unchanged, r.CodebaseID)
		}
	}
	if err := s.Store.RecordChecks(ctx, unchanged, in.Now); err != nil {
		return nil, AppError(err)
	}
	return p.Outcomes, nil
}

func (s *Sweeps) checkHead(ctx context.Context, r workflows.DueRepo, timeout time.Duration) workflows.HeadOutcome {
	host, err := s.Hosts.Lookup(r.Repo.Host)
	if err != nil {
		return workflows.HeadGone
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	head, err := s.Heads.Head(ctx, host.CloneURL(r.Repo.Owner, r.Repo.Name))
	switch {
	case err != nil && errclass.Classify(err).Class == errclass.Permanent:
		return workflows.HeadGone
	case err != nil:
		return workflows.HeadFailed
	case head != "" && head == r.LastCommit && r.PolicyCurrent:
		return workflows.HeadUnchanged
	}
	return workflows.HeadChanged
}

// StartCollect starts (or joins) the Collect of a repository: the workflow
// id is the repository's, so a manual collect or another sweep already
// running for it is joined, never doubled.
func (s *Sweeps) StartCollect(ctx context.Context, repo repoid.ID) error {
	if err := workflows.StartCollect(ctx, s.Client, repo); err != nil {
		return AppError(fmt.Errorf("start the collection of %s: %w", repo, err))
	}
	return nil
}

// StartCollectsProgress is StartCollects' heartbeat: the outcomes so far,
// in input order (empty for a repository not started yet). A retry resumes
// from it: a repository with an outcome is not started again (starting it
// again would be harmless anyway: the start joins the run it began).
type StartCollectsProgress struct {
	// Last is the index of the repository started last (-1: none yet).
	Last     int                      `json:"last"`
	Started  int                      `json:"started"`
	Failed   int                      `json:"failed"`
	Outcomes []workflows.StartOutcome `json:"outcomes"`
}

func (p *StartCollectsProgress) add(i int, o workflows.StartOutcome) {
	p.Outcomes[i] = o
	p.Last = i
	if o.Result == workflows.StartStarted {
		p.Started++
	} else {
		p.Failed++
	}
}

// StartCollects starts (or joins) the Collect of each repository of a
// window, as StartCollect does (the repository's workflow id, conflict
// policy use-existing), in.Parallel at a time, each start bounded by
// workflows.StartTimeout and tried twice if its error is retryable. A start
// that fails fails alone: its outcome says why, and the sweep's breaker
// counts it. It heartbeats after each start with the progress so far; a
// retry resumes from the last heartbeat.
func (s *Sweeps) StartCollects(ctx context.Context, in workflows.StartCollectsInput) ([]workflows.StartOutcome, error) {
	p := resumed(ctx, StartCollectsProgress{Last: -1, Outcomes: make([]workflows.StartOutcome, len(in.Repos))},
		func(prev StartCollectsProgress) bool { return len(prev.Outcomes) == len(in.Repos) })
	parallel := in.Parallel
	if parallel <= 0 {
		parallel = 8
	}
	var mu sync.Mutex
	_ = inParallel(ctx, len(in.Repos), parallel, func(i int) bool { return p.Outcomes[i].Result == "" },
		func(i int) error {
			o := s.startCollect(ctx, in.Repos[i])
			if ctx.Err() != nil {
				return nil // the attempt is over: its outcome may be its own doing
			}
			mu.Lock()
			defer mu.Unlock()
			p.add(i, o)
			progress := p
			progress.Outcomes = slices.Clone(p.Outcomes)
			activity.RecordHeartbeat(ctx, progress)
			return nil
		})
	if err := ctx.Err(); err != nil {
		return nil, AppError(err)
	}
	return p.Outcomes, nil
}

// resumed is the progress the attempt before this one heartbeated, when it
// fits this input; else fresh.
func resumed[P any](ctx context.Context, fresh P, fits func(P) bool) P {
	if activity.HasHeartbeatDetails(ctx) {
		var prev P
		if activity.GetHeartbeatDetails(ctx, &prev) == nil && fits(prev) {
			return prev
		}
	}
	return fresh
}

// inParallel runs work(i) for each i < n that is pending (not done by an
// earlier attempt), parallel at a time, and starts no more once ctx is
// done. It returns the first error of any work, once all have returned.
func inParallel(ctx context.Context, n, parallel int, pending func(i int) bool, work func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, parallel)
	for i := range n {
		if !pending(i) {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := work(i); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// startCollect is one start of StartCollects: a retryable error is tried
// once more, a second later.
func (s *Sweeps) startCollect(ctx context.Context, repo repoid.ID) workflows.StartOutcome {
	var err error
	for attempt := range 2 {
		if attempt > 0 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return workflows.StartOutcome{Result: workflows.StartFailed, Reason: ctx.Err().Error()}
			}
		}
		sctx, cancel := context.WithTimeout(ctx, workflows.StartTimeout)
		err = workflows.StartCollect(sctx, s.Client, repo)
		cancel()
		if err == nil {
			return workflows.StartOutcome{Result: workflows.StartStarted}
		}
		if errclass.Classify(err).Class != errclass.Retryable {
			break
		}
	}
	return workflows.StartOutcome{Result: workflows.StartFailed, Reason: fmt.Sprintf("start the collection of %s: %v", repo, err)}
}

// ResetFailures clears a codebase's failure streak (a manual collect).
func (a *Activities) ResetFailures(ctx context.Context, repo repoid.ID) error {
	return AppError(a.Store.ResetFailures(ctx, repo, a.now()))
}
