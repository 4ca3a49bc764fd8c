package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

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
	Store *store.Store
	// Start starts a Collect (the workflows package's, injected to keep
	// this package free of a dependency on it).
	Start  func(ctx context.Context, c client.Client, repo repoid.ID) error
	Client client.Client
	Hosts  vcs.Hosts
	Heads  HeadChecker
	// Policy is the scanner's current rule set: a repository scanned under
	// another is changed even when its head is not.
	Policy string
	Decay  decay.Table
	Log    *zap.Logger
}

// DueRepo is a codebase the sweep found due.
type DueRepo struct {
	CodebaseID int64     `json:"codebaseId"`
	Repo       repoid.ID `json:"repository"`
	LastCommit string    `json:"lastCommit,omitempty"`
	// PolicyCurrent reports that its last scan used the current rules.
	PolicyCurrent bool `json:"policyCurrent,omitempty"`
}

// SweepPageInput asks for the next page of candidates.
type SweepPageInput struct {
	After store.SweepCursor `json:"after"`
	Limit int               `json:"limit"`
	Now   time.Time         `json:"now"`
}

// SweepPage is one page of decisions.
type SweepPage struct {
	// Next is where the next page starts; Done reports the last page.
	Next       store.SweepCursor `json:"next"`
	Done       bool              `json:"done"`
	Considered int               `json:"considered"`
	Due        []DueRepo         `json:"due,omitempty"`
}

// ListDue reads a page of candidates and decides, with the decay table,
// which are due.
func (s *Sweeps) ListDue(ctx context.Context, in SweepPageInput) (SweepPage, error) {
	table := s.Decay
	if table == nil {
		table = decay.Default
	}
	cands, err := s.Store.SweepCandidates(ctx, in.After, in.Now.Add(-table.Horizon()), in.Now, in.Limit)
	if err != nil {
		return SweepPage{}, AppError(err)
	}
	page := SweepPage{Next: in.After, Considered: len(cands), Done: len(cands) < in.Limit}
	for _, c := range cands {
		page.Next = store.SweepCursor{Viewed: *c.LastViewedAt, ID: c.ID}
		due, _ := table.Decide(decay.Candidate{LastViewed: c.LastViewedAt, LastCompleted: c.LastCompletedAt,
			LastChecked: c.LastCheckedAt, ConsecutiveFailures: c.ConsecutiveFailures}, in.Now)
		if due {
			page.Due = append(page.Due, DueRepo{CodebaseID: c.ID, Repo: c.Repo, LastCommit: c.LastCommitSHA,
				PolicyCurrent: c.ScanPolicy != "" && c.ScanPolicy == s.Policy})
		}
	}
	return page, nil
}

// Check outcomes.
const (
	HeadChanged   = "changed"
	HeadUnchanged = "unchanged"
	HeadFailed    = "failed" // Retryable: counts toward the sweep's circuit breaker
	HeadGone      = "gone"   // Permanent: counted as the repository's failure
)

// CheckHeadsInput asks for cheap change checks.
type CheckHeadsInput struct {
	Repos []DueRepo `json:"repos"`
	Now   time.Time `json:"now"`
}

// CheckHeads lists each due repository's head (no clone, no API request).
// An unchanged head under unchanged rules is recorded as checked; a
// repository that is gone or private counts a failure. The outcomes come
// back in input order, so the workflow can tell consecutive failures.
func (s *Sweeps) CheckHeads(ctx context.Context, in CheckHeadsInput) ([]string, error) {
	out := make([]string, len(in.Repos))
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
		case HeadUnchanged:
			unchanged = append(unchanged, r.CodebaseID)
		case HeadGone:
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

func (s *Sweeps) checkHead(ctx context.Context, r DueRepo) string {
	host, err := s.Hosts.Lookup(r.Repo.Host)
	if err != nil {
		return HeadGone
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	head, err := s.Heads.Head(ctx, host.CloneURL(r.Repo.Owner, r.Repo.Name))
	switch {
	case err != nil && errclass.Classify(err).Class == errclass.Permanent:
		return HeadGone
	case err != nil:
		return HeadFailed
	case head != "" && head == r.LastCommit && r.PolicyCurrent:
		return HeadUnchanged
	}
	return HeadChanged
}

// StartCollect starts (or joins) the Collect of a repository: the workflow
// id is the repository's, so a manual collect or another sweep already
// running for it is joined, never doubled.
func (s *Sweeps) StartCollect(ctx context.Context, repo repoid.ID) error {
	if err := s.Start(ctx, s.Client, repo); err != nil {
		return AppError(fmt.Errorf("start the collection of %s: %w", repo, err))
	}
	return nil
}

// ResetFailures clears a codebase's failure streak (a manual collect).
func (a *Activities) ResetFailures(ctx context.Context, repo repoid.ID) error {
	return AppError(a.Store.ResetFailures(ctx, repo, a.now()))
}
