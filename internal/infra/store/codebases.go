package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
)

// Codebase is a stored repository identity.
type Codebase struct {
	ID                  int64      `json:"id"`
	Host                string     `json:"host"`
	ExternalID          string     `json:"externalId"`
	Owner               string     `json:"owner"`
	Name                string     `json:"name"`
	DefaultBranch       string     `json:"defaultBranch,omitempty"`
	LastCommitSHA       string     `json:"lastCommitSha,omitempty"`
	LastCompletedAt     *time.Time `json:"lastCompletedAt,omitempty"`
	LastViewedAt        *time.Time `json:"lastViewedAt,omitempty"`
	LastCheckedAt       *time.Time `json:"lastCheckedAt,omitempty"`
	ConsecutiveFailures int        `json:"consecutiveFailures"`
	StaleSince          *time.Time `json:"staleSince,omitempty"`
	// InaccessibleSince is since when gitfleet cannot read the repository
	// (private, or deleted and the API cannot tell): not stale, never
	// deleted for it.
	InaccessibleSince *time.Time `json:"inaccessibleSince,omitempty"`
	// LastRefsDigest names the branches and tags the last completed
	// collection saw (mirror.RefsDigest).
	LastRefsDigest string    `json:"lastRefsDigest,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}

// Repo is the codebase's current host/owner/name.
func (c *Codebase) Repo() repoid.ID { return repoid.ID{Host: c.Host, Owner: c.Owner, Name: c.Name} }

// Identity is the part the identity decision looks at.
func (c *Codebase) Identity() *identity.Codebase {
	if c == nil {
		return nil
	}
	return &identity.Codebase{ID: c.ID, ExternalID: c.ExternalID, Owner: c.Owner, Name: c.Name,
		LastCommitSHA: c.LastCommitSHA, Stale: c.StaleSince != nil}
}

const codebaseColumns = `id, host, external_repo_id, owner, name, coalesce(default_branch, ''),
	coalesce(last_commit_sha, ''), last_completed_at, last_viewed_at, last_checked_at, consecutive_failures, stale_since,
	inaccessible_since, coalesce(last_refs_digest, ''), created_at`

func scanCodebase(row pgx.Row) (*Codebase, error) {
	var c Codebase
	err := row.Scan(&c.ID, &c.Host, &c.ExternalID, &c.Owner, &c.Name, &c.DefaultBranch,
		&c.LastCommitSHA, &c.LastCompletedAt, &c.LastViewedAt, &c.LastCheckedAt, &c.ConsecutiveFailures, &c.StaleSince,
		&c.InaccessibleSince, &c.LastRefsDigest, &c.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

const (
	byLiveName = `SELECT ` + codebaseColumns + ` FROM codebases
		WHERE host = $1 AND lower(owner) = lower($2) AND lower(name) = lower($3) AND NOT is_stale`
	byExternalID    = `SELECT ` + codebaseColumns + ` FROM codebases WHERE host = $1 AND external_repo_id = $2`
	byNameLiveFirst = `SELECT ` + codebaseColumns + ` FROM codebases
		WHERE host = $1 AND lower(owner) = lower($2) AND lower(name) = lower($3)
		ORDER BY is_stale, stale_since DESC NULLS FIRST LIMIT 1`
)

// LiveCodebaseByName returns the live codebase holding host/owner/name
// (case-insensitively), or nil.
func (s *Store) LiveCodebaseByName(ctx context.Context, r repoid.ID) (*Codebase, error) {
	return scanCodebase(s.pool.QueryRow(ctx, byLiveName, r.Host, r.Owner, r.Name))
}

// CodebaseByID returns a codebase or nil.
func (s *Store) CodebaseByID(ctx context.Context, id int64) (*Codebase, error) {
	return scanCodebase(s.pool.QueryRow(ctx, `SELECT `+codebaseColumns+` FROM codebases WHERE id = $1`, id))
}

// FindCodebase is what a user means by a name: the live codebase holding it,
// else the codebase that held it most recently and is now stale.
func (s *Store) FindCodebase(ctx context.Context, r repoid.ID) (*Codebase, error) {
	return scanCodebase(s.pool.QueryRow(ctx, byNameLiveFirst, r.Host, r.Owner, r.Name))
}

// CodebaseByFormerName returns the codebase most recently collected under
// host/owner/name (case-insensitively) when it holds another name now: a
// codebase keeps the names it had in its collection history, so a renamed
// or transferred repository is found by its old name. Nil when none.
func (s *Store) CodebaseByFormerName(ctx context.Context, r repoid.ID) (*Codebase, error) {
	return scanCodebase(s.pool.QueryRow(ctx, byFormerName, r.Host, r.Owner, r.Name))
}

// byFormerName reads the collections under a name through their index
// collections_name, as byNameLiveFirst reads codebases through
// codebases_name (TestNameLookupsUseTheirIndexes).
const byFormerName = `SELECT ` + codebaseColumns + ` FROM codebases WHERE id = (
	SELECT c.codebase_id FROM collections c JOIN codebases cb ON cb.id = c.codebase_id
	WHERE c.host = $1 AND lower(c.owner) = lower($2) AND lower(c.name) = lower($3)
		AND (lower(cb.owner) <> lower($2) OR lower(cb.name) <> lower($3))
	ORDER BY c.started_at DESC, c.id DESC LIMIT 1)`

// FormerNames lists the other names a codebase was collected under, most
// recent first.
func (s *Store) FormerNames(ctx context.Context, codebaseID int64) ([]repoid.ID, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.host, min(c.owner), min(c.name) FROM collections c JOIN codebases cb ON cb.id = c.codebase_id
		WHERE c.codebase_id = $1 AND (lower(c.owner) <> lower(cb.owner) OR lower(c.name) <> lower(cb.name))
		GROUP BY c.host, lower(c.owner), lower(c.name) ORDER BY max(c.started_at) DESC`, codebaseID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (repoid.ID, error) {
		var r repoid.ID
		err := row.Scan(&r.Host, &r.Owner, &r.Name)
		return r, err
	})
}

// ApplyInput is what one collection observed, to be applied.
type ApplyInput struct {
	// Key identifies the collection; applying the same key twice returns the
	// first outcome.
	Key               string
	WorkflowID, RunID string
	identity.Observation
	Now time.Time
}

// ApplyIdentity applies an identity decision case by case in one
// transaction: it locks the rows the decision depends on, decides again on
// those rows with identity.Decide, writes the outcome and opens the
// collection record. No blind upsert: every write follows from the decision.
func (s *Store) ApplyIdentity(ctx context.Context, in ApplyInput) (identity.Outcome, error) {
	var out identity.Outcome
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = identity.Outcome{}
		if done, err := appliedBefore(ctx, tx, in.Key); err != nil || done != nil {
			if done != nil {
				out = *done
			}
			return err
		}
		name := in.Repo
		if in.API != nil {
			name.Owner, name.Name = in.API.Owner, in.API.Name
		}
		byName, err := scanCodebase(tx.QueryRow(ctx, byLiveName+` FOR UPDATE`, name.Host, name.Owner, name.Name))
		if err != nil {
			return err
		}
		facts := identity.Facts{ByName: byName.Identity(), API: in.API}
		if byName != nil && byName.ID == in.ExpectByNameID && in.VerifiedSHA != "" && byName.LastCommitSHA == in.VerifiedSHA {
			facts.Verified = true
		}
		if in.API == nil && !facts.Verified {
			out.Changed = true
			return nil
		}
		if in.API != nil {
			byExt, err := scanCodebase(tx.QueryRow(ctx, byExternalID+` FOR UPDATE`, name.Host, in.API.ExternalID))
			if err != nil {
				return err
			}
			facts.ByExternalID = byExt.Identity()
		}
		d, err := identity.Decide(facts)
		if err != nil {
			return err
		}
		out, err = write(ctx, tx, in, name, d)
		return err
	})
	if err != nil {
		return identity.Outcome{}, fmt.Errorf("apply identity of %s: %w", in.Repo, err)
	}
	return out, nil
}

func appliedBefore(ctx context.Context, tx pgx.Tx, key string) (*identity.Outcome, error) {
	var r identity.Outcome
	var c string
	var retired *int64
	err := tx.QueryRow(ctx, `SELECT c.identity_case, c.codebase_id, cb.owner, cb.name, c.retired_codebase_id
		FROM collections c JOIN codebases cb ON cb.id = c.codebase_id
		WHERE c.key = $1 AND c.identity_case IS NOT NULL`, key).Scan(&c, &r.CodebaseID, &r.Owner, &r.Name, &retired)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.Case = identity.Case(c)
	if retired != nil {
		r.RetiredID = *retired
	}
	return &r, nil
}

func write(ctx context.Context, tx pgx.Tx, in ApplyInput, name repoid.ID, d identity.Decision) (identity.Outcome, error) {
	out := identity.Outcome{Case: d.Case}
	// Retire first: the name it frees may be the one the target takes, and
	// the live-name index would otherwise reject the update.
	if d.Retire != nil {
		if _, err := tx.Exec(ctx, `UPDATE codebases SET stale_since = $2, updated_at = $2 WHERE id = $1`, d.Retire.ID, in.Now); err != nil {
			return out, err
		}
		out.RetiredID = d.Retire.ID
	}
	switch {
	case d.Target == nil:
		err := tx.QueryRow(ctx, `INSERT INTO codebases (host, external_repo_id, owner, name, default_branch, created_at, updated_at)
			VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $6) RETURNING id`,
			name.Host, in.API.ExternalID, in.API.Owner, in.API.Name, in.DefaultBranch, in.Now).Scan(&out.CodebaseID)
		if err != nil {
			return out, err
		}
		out.Owner, out.Name = in.API.Owner, in.API.Name
	default:
		out.CodebaseID, out.Owner, out.Name = d.Target.ID, d.Target.Owner, d.Target.Name
		if d.Rename {
			out.Owner, out.Name = in.API.Owner, in.API.Name
		}
		_, err := tx.Exec(ctx, `UPDATE codebases SET owner = $2, name = $3,
			stale_since = CASE WHEN $4 THEN NULL ELSE stale_since END,
			default_branch = coalesce(nullif($5, ''), default_branch), updated_at = $6
			WHERE id = $1`, out.CodebaseID, out.Owner, out.Name, d.Unstale, in.DefaultBranch, in.Now)
		if err != nil {
			return out, err
		}
	}
	var retired *int64
	if out.RetiredID != 0 {
		retired = &out.RetiredID
	}
	_, err := tx.Exec(ctx, `INSERT INTO collections (key, codebase_id, host, owner, name, identity_case,
			retired_codebase_id, commit_sha, status, workflow_id, run_id, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), 'running', $9, $10, $11)
		ON CONFLICT (key) DO UPDATE SET codebase_id = excluded.codebase_id, identity_case = excluded.identity_case,
			retired_codebase_id = excluded.retired_codebase_id, commit_sha = excluded.commit_sha`,
		in.Key, out.CodebaseID, in.Repo.Host, in.Repo.Owner, in.Repo.Name, string(d.Case),
		retired, in.Head, in.WorkflowID, in.RunID, in.Now)
	return out, err
}

// CompleteCollection records a successful collection: the codebase's last
// commit (what the next collection verifies by SHA), the digest of the
// branches and tags it saw (what the sweep's change check compares; kept
// when empty, as runs recorded before it pass none), completion time, a
// reset failure streak, and a readable repository.
func (s *Store) CompleteCollection(ctx context.Context, key string, codebaseID int64, commit, refsDigest string, now time.Time) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE collections SET status = 'succeeded', finished_at = $3, commit_sha = nullif($4, '')
			WHERE key = $1 AND codebase_id = $2 AND status <> 'succeeded'`, key, codebaseID, now, commit)
		if err != nil || tag.RowsAffected() == 0 {
			return err // already completed: an idempotent retry
		}
		_, err = tx.Exec(ctx, `UPDATE codebases SET last_commit_sha = coalesce(nullif($2, ''), last_commit_sha),
			last_refs_digest = coalesce(nullif($4, ''), last_refs_digest), inaccessible_since = NULL,
			last_completed_at = $3, consecutive_failures = 0, updated_at = $3 WHERE id = $1`, codebaseID, commit, now, refsDigest)
		return err
	})
}

// Failure describes a collection that failed or was cancelled.
type Failure struct {
	Key               string
	Repo              repoid.ID
	Class, Message    string
	WorkflowID, RunID string
	// Strike: the failure is the repository's own doing (blame.Strikes)
	// and lengthens its failure streak; the host's and the
	// infrastructure's never do.
	Strike bool
	// Cancelled: somebody cancelled the collection; it is recorded as
	// cancelled, not failed, and never strikes.
	Cancelled bool
	Now       time.Time
}

// FailCollection records a failed (or cancelled) collection and, for a
// failure of the repository's own doing, lengthens the failure streak of
// the codebase the collection is about (if any), which the re-collection
// sweep uses to stop trying.
func (s *Store) FailCollection(ctx context.Context, f Failure) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var codebaseID *int64
		err := tx.QueryRow(ctx, `SELECT codebase_id FROM collections WHERE key = $1`, f.Key).Scan(&codebaseID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// The failure belongs to the codebase the name means: the live
			// one, or the one just marked stale because its repository is gone.
			cb, err := scanCodebase(tx.QueryRow(ctx, byNameLiveFirst, f.Repo.Host, f.Repo.Owner, f.Repo.Name))
			if err != nil {
				return err
			}
			if cb != nil {
				codebaseID = &cb.ID
			}
		case err != nil:
			return err
		}
		status := "failed"
		if f.Cancelled {
			status = "cancelled"
		}
		tag, err := tx.Exec(ctx, `INSERT INTO collections (key, codebase_id, host, owner, name, status,
				error_class, error_message, workflow_id, run_id, started_at, finished_at)
			VALUES ($1, $2, $3, $4, $5, $11, $6, $7, $8, $9, $10, $10)
			ON CONFLICT (key) DO UPDATE SET status = excluded.status, error_class = excluded.error_class,
				error_message = excluded.error_message, finished_at = excluded.finished_at
			WHERE collections.status = 'running'`,
			f.Key, codebaseID, f.Repo.Host, f.Repo.Owner, f.Repo.Name, f.Class, f.Message, f.WorkflowID, f.RunID, f.Now, status)
		if err != nil || tag.RowsAffected() == 0 || codebaseID == nil || !f.Strike || f.Cancelled {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE codebases SET consecutive_failures = consecutive_failures + 1, updated_at = $2
			WHERE id = $1`, *codebaseID, f.Now)
		return err
	})
}

// MarkStale marks a codebase stale (its repository no longer exists).
func (s *Store) MarkStale(ctx context.Context, codebaseID int64, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE codebases SET stale_since = $2, updated_at = $2
		WHERE id = $1 AND NOT is_stale`, codebaseID, now)
	return err
}

// MarkStaleSince marks a codebase stale unless it is already, and returns
// since when it is stale.
func (s *Store) MarkStaleSince(ctx context.Context, codebaseID int64, now time.Time) (time.Time, error) {
	if err := s.MarkStale(ctx, codebaseID, now); err != nil {
		return time.Time{}, err
	}
	var since *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT stale_since FROM codebases WHERE id = $1`, codebaseID).Scan(&since); err != nil {
		return time.Time{}, err
	}
	if since == nil {
		return time.Time{}, fmt.Errorf("codebase %d is not stale after marking it", codebaseID)
	}
	return since.UTC(), nil
}

// MarkInaccessible notes that gitfleet cannot read a codebase's repository
// any more (private, or deleted and the API cannot tell), unless it is
// noted already, and returns since when. The codebase stays live: nothing
// deletes it for this.
func (s *Store) MarkInaccessible(ctx context.Context, codebaseID int64, now time.Time) (time.Time, error) {
	var since time.Time
	err := s.pool.QueryRow(ctx, `UPDATE codebases SET inaccessible_since = coalesce(inaccessible_since, $2), updated_at = $2
		WHERE id = $1 RETURNING inaccessible_since`, codebaseID, now).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("codebase %d does not exist", codebaseID)
	}
	return since.UTC(), err
}

// RecordView notes that a user looked at a codebase's results; views drive
// how often it is re-collected.
func (s *Store) RecordView(ctx context.Context, codebaseID int64, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE codebases SET last_viewed_at = $2 WHERE id = $1`, codebaseID, now)
	return err
}

// Collection is one entry of a codebase's history.
type Collection struct {
	ID           int64         `json:"id"`
	Repo         repoid.ID     `json:"repository"`
	Case         identity.Case `json:"case,omitempty"`
	CommitSHA    string        `json:"commit,omitempty"`
	Status       string        `json:"status"`
	ErrorClass   string        `json:"errorClass,omitempty"`
	ErrorMessage string        `json:"error,omitempty"`
	WorkflowID   string        `json:"workflowId"`
	RunID        string        `json:"runId"`
	StartedAt    time.Time     `json:"startedAt"`
	FinishedAt   *time.Time    `json:"finishedAt,omitempty"`
}

// Collections lists a codebase's history, newest first.
func (s *Store) Collections(ctx context.Context, codebaseID int64, limit int) ([]Collection, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, host, owner, name, coalesce(identity_case, ''), coalesce(commit_sha, ''),
			status, coalesce(error_class, ''), coalesce(error_message, ''), workflow_id, run_id, started_at, finished_at
		FROM collections WHERE codebase_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2`, codebaseID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Collection, error) {
		var c Collection
		var cs string
		err := row.Scan(&c.ID, &c.Repo.Host, &c.Repo.Owner, &c.Repo.Name, &cs, &c.CommitSHA, &c.Status,
			&c.ErrorClass, &c.ErrorMessage, &c.WorkflowID, &c.RunID, &c.StartedAt, &c.FinishedAt)
		c.Case = identity.Case(cs)
		return c, err
	})
}

// ScanCurrent reports whether a codebase's scan is current for the refs
// refsDigest names under the rules policy names: its last collection saw
// those refs (and completed, scan included), and its shard is Done at a
// checkpoint under that policy — what the sweep's change check calls
// unchanged. Anything unknown is not current.
func (s *Store) ScanCurrent(ctx context.Context, codebaseID int64, refsDigest, policy string) (bool, error) {
	if refsDigest == "" || policy == "" {
		return false, nil
	}
	var current bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM codebases c
		JOIN shards s ON s.key = 'codebase:' || c.id AND s.status = 'Done'
		JOIN shard_receipts r ON r.id = s.checkpoint_receipt_id
		JOIN scan_scopes sc ON sc.id = r.scope_id
		WHERE c.id = $1 AND c.last_refs_digest = $2 AND sc.policy_hash = $3)`, codebaseID, refsDigest, policy).Scan(&current)
	if err != nil {
		return false, fmt.Errorf("scan state of codebase %d: %w", codebaseID, err)
	}
	return current, nil
}
