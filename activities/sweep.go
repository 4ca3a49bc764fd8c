package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gitfleet/workflows"

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

// Sweeps are the re-collection sweep's activities (DESIGN §5).
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

// CheckHeads lists each due repository's head (no clone, no API request).
// An unchanged head under unchanged rules is recorded as checked; a
// repository that is gone or private counts a failure. The outcomes come
// back in input order, so the workflow can tell consecutive failures.
func (s *Sweeps) CheckHeads(ctx context.Context, in workflows.CheckHeadsInput) ([]workflows.HeadOutcome, error) {
	out := make([]workflows.HeadOutcome, len(in.Repos))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, r := range in.Repos {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = s.checkHead(ctx, r)
		}()
	}
	wg.Wait()
	var unchanged []int64
	for i, r := range in.Repos {
		switch out[i] {
		case workflows.HeadUnchanged:
			unchanged = append(unchanged, r.CodebaseID)
		case workflows.HeadGone:
			if err := s.Store.RecordCheckFailure(ctx, r.CodebaseID, in.Now); err != nil {
				return nil, AppError(err)
			}
		}
	}
	if err := s.Store.RecordChecks(ctx, unchanged, in.Now); err != nil {
		return nil, AppError(err)
	}
	return out, nil
}

func (s *Sweeps) checkHead(ctx context.Context, r workflows.DueRepo) workflows.HeadOutcome {
	host, err := s.Hosts.Lookup(r.Repo.Host)
	if err != nil {
		return workflows.HeadGone
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
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

// ResetFailures clears a codebase's failure streak (a manual collect).
func (a *Activities) ResetFailures(ctx context.Context, repo repoid.ID) error {
	return AppError(a.Store.ResetFailures(ctx, repo, a.now()))
}
