package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"gitfleet/workflows"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"gitfleet/internal/domain/blame"
	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/sweeprange"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
)

// HeadChecker answers the sweep's cheap change check.
type HeadChecker interface {
	// RefsDigest lists the remote's refs (no clone, no API request) and
	// names its branches and tags as a collection's sync does
	// (mirror.RefsDigest): every ref a scan selects, not only HEAD.
	RefsDigest(ctx context.Context, cloneURL string) (string, error)
}

// LsRemote checks remotes with go-git's reference advertisement,
// authenticated as a collection's fetch is (Creds, nil: anonymously), so
// private repositories stay fresh.
type LsRemote struct {
	Creds mirror.Credentials
}

// RefsDigest lists the remote's refs and digests its branches and tags.
func (l LsRemote) RefsDigest(ctx context.Context, cloneURL string) (string, error) {
	refs, err := mirror.ListRefsWith(ctx, cloneURL, l.Creds)
	if err != nil {
		return "", err
	}
	return mirror.RefsDigest(refs), nil
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
	// WorkerOffline is how long a silent worker still counts as live when
	// the ranges are one per worker (GITFLEET_WORKER_OFFLINE_AFTER;
	// zero: a minute).
	WorkerOffline time.Duration
	Log           *zap.Logger
}

// ListDue reads a page of candidates and decides, with the decay table,
// which are due.
func (s *Sweeps) ListDue(ctx context.Context, in workflows.SweepPageInput) (workflows.SweepPage, error) {
	table := s.Decay
	if table == nil {
		table = decay.Default
	}
	list := s.Store.SweepCandidates
	if in.Newest {
		list = s.Store.SweepCandidatesNewest
	}
	var buckets store.SweepBuckets
	if in.Range != nil {
		buckets.Lo, buckets.Hi = in.Range.Buckets()
	}
	cands, err := list(ctx, store.SweepCursor(in.After), in.Now.Add(-table.Horizon()), in.Now, in.Limit, in.SkipHosts, buckets)
	if err != nil {
		return workflows.SweepPage{}, AppError(err)
	}
	page := workflows.SweepPage{Next: in.After, Considered: len(cands), Done: len(cands) < in.Limit}
	for _, c := range cands {
		page.Next = workflows.SweepCursor{Viewed: *c.LastViewedAt, ID: c.ID}
		if resumedAfter(in.Resume, c) {
			page.Deferred++
			continue
		}
		due, _ := table.Decide(decay.Candidate{LastViewed: c.LastViewedAt, LastCompleted: c.LastCompletedAt,
			LastChecked: c.LastCheckedAt, LastEvent: c.LastEventAt, ConsecutiveFailures: c.ConsecutiveFailures}, in.Now)
		if due {
			page.Due = append(page.Due, workflows.DueRepo{CodebaseID: c.ID, Viewed: *c.LastViewedAt, Repo: c.Repo, LastCommit: c.LastCommitSHA,
				RefsDigest: c.LastRefsDigest, PolicyCurrent: c.ScanPolicy != "" && c.ScanPolicy == s.Policy})
		}
	}
	return page, nil
}

// SweepRanges is how many ranges a pass of the sweep has: fixed when > 0,
// else one per live worker of the fleet (sweeprange.Count).
func (s *Sweeps) SweepRanges(ctx context.Context, fixed int) (int, error) {
	if fixed > 0 {
		return sweeprange.Count(fixed, 0), nil
	}
	live, err := s.Store.LiveWorkers(ctx, workflows.TaskQueue, cmp.Or(s.WorkerOffline, time.Minute))
	if err != nil {
		return 0, AppError(fmt.Errorf("count the live workers: %w", err))
	}
	return sweeprange.Count(0, len(live)), nil
}

// resumedAfter reports whether the last sweep halted c's host or owner at
// or after c (in newest-first order: c is not older than where it
// stopped): c was handled then, or is left for the sweep after this one, so
// that this one takes up the host where the last one stopped.
func resumedAfter(resume map[string]workflows.SweepCursor, c store.SweepCandidate) bool {
	for _, key := range []string{blame.HostKey(c.Repo.Host), blame.OwnerKey(c.Repo.Host, c.Repo.Owner)} {
		at, ok := resume[key]
		if !ok {
			continue
		}
		if v := *c.LastViewedAt; v.After(at.Viewed) || v.Equal(at.Viewed) && c.ID >= at.ID {
			return true
		}
	}
	return false
}

// LoadSweepResume is what the last sweep of a Carry left: where each host
// (owner) it halted stopped.
func (s *Sweeps) LoadSweepResume(ctx context.Context, carry string) (workflows.SweepResumeState, error) {
	state := workflows.SweepResumeState{Carry: carry}
	v, err := s.Store.SweepResume(ctx, carry)
	if err != nil || v == nil {
		return state, AppError(err)
	}
	if err := json.Unmarshal(v, &state); err != nil {
		// A row nobody can read resumes nothing: the sweep starts fresh.
		s.log().Warn("unreadable sweep resume state", zap.String("carry", carry), zap.Error(err))
		return workflows.SweepResumeState{Carry: carry}, nil
	}
	return state, nil
}

// SaveSweepResume leaves a sweep's halted hosts (owners) for the next sweep
// of its Carry, replacing what the last one left.
func (s *Sweeps) SaveSweepResume(ctx context.Context, state workflows.SweepResumeState) error {
	v, err := json.Marshal(state)
	if err != nil {
		return AppError(err)
	}
	return AppError(s.Store.SetSweepResume(ctx, state.Carry, v))
}

// CheckHeadsProgress is CheckHeads' heartbeat: the outcomes so far, in
// input order ("" for a remote not checked yet), how each check went, and
// their counts. A failure's outcome is HeadFailed until the whole batch is
// checked and it is known whose doing it was. A retry resumes from it: a
// remote with an outcome is not checked again.
type CheckHeadsProgress struct {
	// Last is the index of the remote checked last (-1: none yet).
	Last      int                     `json:"last"`
	Checked   int                     `json:"checked"`
	Changed   int                     `json:"changed"`
	Unchanged int                     `json:"unchanged"`
	Failed    int                     `json:"failed"`
	Outcomes  []workflows.HeadOutcome `json:"outcomes"`
	Checks    []blame.Check           `json:"checks"`
	// Stopped are the hosts given up (StopHostAfter), Streaks the failures
	// in a row of the others, as the checks ended.
	Stopped []string       `json:"stopped,omitempty"`
	Streaks map[string]int `json:"streaks,omitempty"`
}

func (p *CheckHeadsProgress) add(i int, o workflows.HeadOutcome, c blame.Check) {
	p.Outcomes[i], p.Checks[i] = o, c
	p.Last = i
	p.Checked++
	switch o {
	case workflows.HeadChanged:
		p.Changed++
	case workflows.HeadUnchanged:
		p.Unchanged++
	case workflows.HeadFailed:
		p.Failed++
	}
}

// countHost counts a check of host, as the checks end: a failure that is
// never a repository's (a timeout, a 5xx, DNS, TLS) lengthens the host's
// streak, an answer ends it; at limit the host is given up for the rest of
// the batch — a dead host's checks cost their whole timeout each.
func (p *CheckHeadsProgress) countHost(host string, c blame.Check, limit int) {
	if p.Streaks == nil {
		p.Streaks = map[string]int{}
	}
	switch {
	case !c.Failed:
		delete(p.Streaks, host)
	case !c.Refused:
		p.Streaks[host]++
		if p.Streaks[host] >= limit && !slices.Contains(p.Stopped, host) {
			p.Stopped = append(p.Stopped, host)
		}
	}
}

// controls is how many repositories known to be there a control check
// lists: the host is up when one of them answers.
const controls = 3

// CheckHeads lists each due repository's refs (no clone, no API request),
// workflows.CheckHeadsParallel at a time, each bounded by the request's
// RemoteTimeout: a remote that hangs fails alone. It heartbeats after each
// remote with the progress so far, and a retry resumes from the last
// heartbeat. A repository whose branches and tags are those its last
// collection saw, under unchanged rules, is recorded as checked.
//
// Failures are then charged per host (blame.Decide): a refusal (404, 401,
// 403) is the repository's own — gone or private, counted as its failure,
// once per sweep — only when the host is seen serving other repositories at
// the same time, in the batch or, when the batch cannot tell (nothing
// answered, or many were refused alike), by a control check of repositories
// known to be there; and, when several of one owner's repositories are
// refused alike, only when a control check of that owner's repositories
// answers: else it is the owner's (an organization enforcing SSO or an IP
// allow-list), HeadOwnerFailed. Any other failure, and a refusal while the
// host refuses everything, is the host's: HeadFailed, which the sweep's
// breaker counts.
// The outcomes come back in input order, so the workflow can tell
// consecutive failures.
func (s *Sweeps) CheckHeads(ctx context.Context, in workflows.CheckHeadsRequest) ([]workflows.HeadOutcome, error) {
	p := resumed(ctx, CheckHeadsProgress{Last: -1, Outcomes: make([]workflows.HeadOutcome, len(in.Repos)), Checks: make([]blame.Check, len(in.Repos))},
		func(prev CheckHeadsProgress) bool {
			return len(prev.Outcomes) == len(in.Repos) && len(prev.Checks) == len(in.Repos)
		})
	timeout := in.RemoteTimeout
	if timeout <= 0 {
		timeout = workflows.DefaultRemoteTimeout
	}
	var mu sync.Mutex
	stopped := func(host string) bool { return slices.Contains(p.Stopped, host) }
	err := inParallel(ctx, len(in.Repos), workflows.CheckHeadsParallel,
		func(i int) bool {
			mu.Lock()
			defer mu.Unlock()
			return p.Outcomes[i] == "" && !stopped(blame.HostKey(in.Repos[i].Repo.Host))
		},
		func(i int) error {
			o, c := s.checkHead(ctx, in.Repos[i], timeout)
			if ctx.Err() != nil {
				return nil // the attempt is over: its outcome may be its own doing
			}
			mu.Lock()
			defer mu.Unlock()
			p.add(i, o, c)
			if in.StopHostAfter > 0 {
				p.countHost(blame.HostKey(in.Repos[i].Repo.Host), c, in.StopHostAfter)
			}
			progress := p
			progress.Outcomes, progress.Checks = slices.Clone(p.Outcomes), slices.Clone(p.Checks)
			progress.Stopped, progress.Streaks = slices.Clone(p.Stopped), maps.Clone(p.Streaks)
			activity.RecordHeartbeat(ctx, progress)
			return nil
		})
	if err = cmp.Or(err, ctx.Err()); err != nil {
		return nil, AppError(err)
	}
	for i, r := range in.Repos {
		if p.Outcomes[i] == "" && stopped(blame.HostKey(r.Repo.Host)) {
			p.Outcomes[i] = workflows.HeadSkipped
		}
	}
	outcomes, err := s.charge(ctx, in, p, timeout)
	if err != nil {
		return nil, AppError(err)
	}
	var unchanged []int64
	for i, r := range in.Repos {
		if outcomes[i] == workflows.HeadUnchanged {
			unchanged = append(unchanged, r.CodebaseID)
		}
	}
	if err := s.Store.RecordChecks(ctx, unchanged, in.Now); err != nil {
		return nil, AppError(err)
	}
	return outcomes, nil
}

// charge decides, host by host, whose doing each failed check was
// (blame.Decide), asking the host's control check and then the owners'
// where the batch cannot tell, and counts the repositories' own failures:
// HeadGone for those, HeadFailed for the host's, HeadOwnerFailed (HeadFailed
// for a request without PerOwner) for an owner's.
func (s *Sweeps) charge(ctx context.Context, in workflows.CheckHeadsRequest, p CheckHeadsProgress, timeout time.Duration) ([]workflows.HeadOutcome, error) {
	outcomes := slices.Clone(p.Outcomes)
	byHost := map[string][]int{}
	var hosts []string
	for i, r := range in.Repos {
		if outcomes[i] == workflows.HeadSkipped {
			continue // not checked: nothing to decide
		}
		if _, ok := byHost[r.Repo.Host]; !ok {
			hosts = append(hosts, r.Repo.Host)
		}
		byHost[r.Repo.Host] = append(byHost[r.Repo.Host], i)
	}
	for _, host := range hosts {
		idx := byHost[host]
		checks := make([]blame.Check, len(idx))
		for j, i := range idx {
			checks[j] = p.Checks[i]
			checks[j].Owner = strings.ToLower(in.Repos[i].Repo.Owner)
		}
		var hostUp *bool
		d := blame.Decide(checks, nil, nil)
		if d.NeedHost {
			up, err := s.controlUp(ctx, host, "", in.Repos, timeout)
			if err != nil {
				return nil, err
			}
			hostUp = &up
			d = blame.Decide(checks, hostUp, nil)
			s.log().Info("control check", zap.String("host", host), zap.Bool("up", up))
		}
		if len(d.NeedOwners) > 0 {
			ownerUp := map[string]bool{}
			for _, owner := range d.NeedOwners {
				up, err := s.controlUp(ctx, host, owner, in.Repos, timeout)
				if err != nil {
					return nil, err
				}
				ownerUp[owner] = up
				s.log().Info("control check", zap.String("host", host), zap.String("owner", owner), zap.Bool("up", up))
			}
			d = blame.Decide(checks, hostUp, ownerUp)
		}
		for j, i := range idx {
			switch d.Parties[j] {
			case blame.Owner:
				outcomes[i] = workflows.HeadFailed
				if in.PerOwner {
					outcomes[i] = workflows.HeadOwnerFailed
				}
			case blame.Repository:
				outcomes[i] = workflows.HeadGone
				if _, err := s.Store.RecordCheckFailure(ctx, in.Repos[i].CodebaseID, in.Sweep, in.Now); err != nil {
					return nil, err
				}
			}
		}
	}
	return outcomes, nil
}

// controlUp is a control check: it lists up to controls repositories of the
// host (of owner, when not "") known to be there (collected, readable,
// outside the batch) at once, and reports whether one answered. Nothing to
// ask counts as down: nothing is charged to a repository on a guess.
func (s *Sweeps) controlUp(ctx context.Context, host, owner string, batch []workflows.DueRepo, timeout time.Duration) (bool, error) {
	exclude := make([]int64, len(batch))
	for i, r := range batch {
		exclude[i] = r.CodebaseID
	}
	repos, err := s.Store.ControlRepositories(ctx, host, owner, exclude, controls)
	if err != nil {
		return false, err
	}
	answered := make(chan bool, len(repos))
	for _, r := range repos {
		go func() {
			_, c := s.checkHead(ctx, workflows.DueRepo{Repo: r}, timeout)
			answered <- !c.Failed
		}()
	}
	up := false
	for range repos {
		up = <-answered || up
	}
	return up, ctx.Err()
}

func (s *Sweeps) log() *zap.Logger {
	if s.Log == nil {
		return zap.NewNop()
	}
	return s.Log
}

// checkHead lists one repository's refs: changed or unchanged, or failed
// with how (a refusal of the repository, or another failure).
func (s *Sweeps) checkHead(ctx context.Context, r workflows.DueRepo, timeout time.Duration) (workflows.HeadOutcome, blame.Check) {
	host, err := s.Hosts.Lookup(r.Repo.Host)
	if err != nil {
		// A host the worker has no configuration for: gitfleet's doing.
		return workflows.HeadFailed, blame.Check{Failed: true, Cause: "unknown host"}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	digest, err := s.Heads.RefsDigest(ctx, host.CloneURL(r.Repo.Owner, r.Repo.Name))
	if err != nil {
		c := errclass.Classify(err)
		return workflows.HeadFailed, blame.Check{Failed: true, Cause: string(c.Class) + "/" + c.Reason,
			Refused: c.Class == errclass.Permanent && (c.Reason == errclass.ReasonNotFound || c.Reason == errclass.ReasonPermissionDenied)}
	}
	if digest == r.RefsDigest && r.PolicyCurrent {
		return workflows.HeadUnchanged, blame.Check{}
	}
	return workflows.HeadChanged, blame.Check{}
}

// runningCollectsQuery counts the Collect runs running now: the sweep's,
// manual ones, an organization's.
const runningCollectsQuery = "WorkflowType = 'Collect' AND ExecutionStatus = 'Running'"

// RunningCollects counts the Collect runs running now, fleet-wide, in
// Temporal's visibility store (eventually consistent: Elasticsearch shows a
// run about a second after it starts; the sweep allows for it).
func (s *Sweeps) RunningCollects(ctx context.Context) (int, error) {
	resp, err := s.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: runningCollectsQuery})
	if err != nil {
		return 0, AppError(fmt.Errorf("count the running collections: %w", err))
	}
	return int(resp.GetCount()), nil
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

// ListAccountCodebases reads a page of an account's live codebases, by
// name, for RecollectAccount.
func (s *Sweeps) ListAccountCodebases(ctx context.Context, in workflows.ListAccountCodebasesInput) (workflows.CachedReposPage, error) {
	repos, err := s.Store.AccountCodebases(ctx, in.Host, in.Account, in.After, in.Limit)
	if err != nil {
		return workflows.CachedReposPage{}, AppError(fmt.Errorf("list the codebases of %s: %w", in.Account, err))
	}
	page := workflows.CachedReposPage{Repos: repos, Next: in.After, Done: len(repos) < in.Limit}
	if len(repos) > 0 {
		page.Next = repos[len(repos)-1].Name
	}
	return page, nil
}
