package store

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/sweeprange"
)

// SweepCandidate is a codebase the re-collection sweep considers.
type SweepCandidate struct {
	ID                  int64      `json:"id"`
	Repo                repoid.ID  `json:"repository"`
	LastCommitSHA       string     `json:"lastCommit,omitempty"`
	LastViewedAt        *time.Time `json:"lastViewedAt,omitempty"`
	LastCompletedAt     *time.Time `json:"lastCompletedAt,omitempty"`
	LastCheckedAt       *time.Time `json:"lastCheckedAt,omitempty"`
	ConsecutiveFailures int        `json:"consecutiveFailures"`
	// ScanPolicy is the rule set of the codebase's last completed scan
	// ("" when it has none).
	ScanPolicy string `json:"scanPolicy,omitempty"`
	// LastRefsDigest names the branches and tags its last completed
	// collection saw ("" before they were recorded).
	LastRefsDigest string `json:"lastRefsDigest,omitempty"`
	// LastEventAt is when a webhook delivery last named the repository.
	LastEventAt *time.Time `json:"lastEventAt,omitempty"`
}

// SweepCursor is where a sweep is: the (last view, id) of the last
// candidate it read.
type SweepCursor struct {
	Viewed time.Time
	ID     int64
}

// SweepCandidatesQuery pages through the candidates: live, fewer than five
// failures in a row, viewed between $3 and $4, after the cursor ($1, $2) in
// (last_viewed_at, id) order — the partial index codebases_sweep_ranged —,
// on none of the hosts $6 (those the sweep's breaker halted), in the
// buckets [$7, $8) (SweepBucket: a sweep's range, sweeprange).
const SweepCandidatesQuery = `SELECT c.id, c.host, c.owner, c.name, coalesce(c.last_commit_sha, ''), c.last_viewed_at,
		c.last_completed_at, c.last_checked_at, c.consecutive_failures, coalesce(sc.policy_hash, ''), coalesce(c.last_refs_digest, ''), c.last_event_at
	FROM codebases c
	LEFT JOIN shards s ON s.key = 'codebase:' || c.id AND s.status = 'Done'
	LEFT JOIN shard_receipts r ON r.id = s.checkpoint_receipt_id
	LEFT JOIN scan_scopes sc ON sc.id = r.scope_id
	WHERE NOT c.is_stale AND c.consecutive_failures < 5
		AND c.last_viewed_at >= $3 AND c.last_viewed_at <= $4 AND (c.last_viewed_at, c.id) > ($1, $2)
		AND c.host <> ALL($6) AND (hashint8(c.id) & 1023) >= $7 AND (hashint8(c.id) & 1023) < $8
	ORDER BY c.last_viewed_at, c.id LIMIT $5`

// SweepCandidatesNewestQuery is SweepCandidatesQuery in the other
// direction: the most recently viewed first, before the cursor (the same
// index, read backwards).
const SweepCandidatesNewestQuery = `SELECT c.id, c.host, c.owner, c.name, coalesce(c.last_commit_sha, ''), c.last_viewed_at,
		c.last_completed_at, c.last_checked_at, c.consecutive_failures, coalesce(sc.policy_hash, ''), coalesce(c.last_refs_digest, ''), c.last_event_at
	FROM codebases c
	LEFT JOIN shards s ON s.key = 'codebase:' || c.id AND s.status = 'Done'
	LEFT JOIN shard_receipts r ON r.id = s.checkpoint_receipt_id
	LEFT JOIN scan_scopes sc ON sc.id = r.scope_id
	WHERE NOT c.is_stale AND c.consecutive_failures < 5
		AND c.last_viewed_at >= $3 AND c.last_viewed_at <= $4 AND (c.last_viewed_at, c.id) < ($1, $2)
		AND c.host <> ALL($6) AND (hashint8(c.id) & 1023) >= $7 AND (hashint8(c.id) & 1023) < $8
	ORDER BY c.last_viewed_at DESC, c.id DESC LIMIT $5`

// SweepBuckets are the buckets [Lo, Hi) of (hashint8(id) & 1023) a sweep
// reads (sweeprange.Range.Buckets); the zero value reads them all.
type SweepBuckets struct{ Lo, Hi int }

func (b SweepBuckets) orAll() SweepBuckets {
	if b.Hi <= b.Lo {
		return SweepBuckets{0, sweeprange.Buckets}
	}
	return b
}

// SweepCandidatesNewest returns up to limit candidates before the cursor,
// viewed between since and until, the most recently viewed first. A zero
// cursor starts at until.
func (s *Store) SweepCandidatesNewest(ctx context.Context, after SweepCursor, since, until time.Time, limit int, skipHosts []string, in SweepBuckets) ([]SweepCandidate, error) {
	if after.Viewed.IsZero() || after.Viewed.After(until) {
		after = SweepCursor{Viewed: until, ID: math.MaxInt64}
	}
	return s.sweepCandidates(ctx, SweepCandidatesNewestQuery, after, since, until, limit, skipHosts, in)
}

// SweepCandidates returns up to limit candidates after the cursor, viewed
// between since and until, on none of skipHosts, in the buckets in. A zero
// cursor starts at since.
func (s *Store) SweepCandidates(ctx context.Context, after SweepCursor, since, until time.Time, limit int, skipHosts []string, in SweepBuckets) ([]SweepCandidate, error) {
	if after.Viewed.Before(since) {
		after = SweepCursor{Viewed: since}
	}
	return s.sweepCandidates(ctx, SweepCandidatesQuery, after, since, until, limit, skipHosts, in)
}

func (s *Store) sweepCandidates(ctx context.Context, query string, after SweepCursor, since, until time.Time, limit int, skipHosts []string, in SweepBuckets) ([]SweepCandidate, error) {
	if skipHosts == nil {
		skipHosts = []string{}
	}
	in = in.orAll()
	rows, err := s.pool.Query(ctx, query, after.Viewed, after.ID, since, until, limit, skipHosts, in.Lo, in.Hi)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (SweepCandidate, error) {
		var c SweepCandidate
		err := row.Scan(&c.ID, &c.Repo.Host, &c.Repo.Owner, &c.Repo.Name, &c.LastCommitSHA, &c.LastViewedAt,
			&c.LastCompletedAt, &c.LastCheckedAt, &c.ConsecutiveFailures, &c.ScanPolicy, &c.LastRefsDigest, &c.LastEventAt)
		return c, err
	})
}

// RecordChecks notes that cheap change checks found these codebases
// unchanged at now.
func (s *Store) RecordChecks(ctx context.Context, ids []int64, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE codebases SET last_checked_at = $2 WHERE id = ANY($1)`, ids, now)
	return err
}

// RecordCheckFailure counts a change check that failed for good (the
// repository is gone or private) like a failed collection, once per sweep:
// a codebase whose failure this sweep already counted is left alone (the
// check's activity may be retried and check it again). An empty sweep
// counts every time. It reports whether it counted.
func (s *Store) RecordCheckFailure(ctx context.Context, id int64, sweep string, now time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE codebases SET consecutive_failures = consecutive_failures + 1,
		check_failed_sweep = nullif($3::text, ''), updated_at = $2
		WHERE id = $1 AND ($3::text = '' OR check_failed_sweep IS DISTINCT FROM $3::text)`, id, now, sweep)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// ControlRepositories lists up to limit live, readable codebases of a host
// (of owner, when not "") that completed a collection, the most recent
// first, leaving out those in exclude: repositories known to be there, which
// a sweep lists to tell a host (an owner) refusing everything from
// repositories gone each on its own.
func (s *Store) ControlRepositories(ctx context.Context, host, owner string, exclude []int64, limit int) ([]repoid.ID, error) {
	q, args := `SELECT host, owner, name FROM codebases
		WHERE host = $1 AND NOT is_stale AND inaccessible_since IS NULL AND last_completed_at IS NOT NULL
			AND id <> ALL($2) AND consecutive_failures = 0
		ORDER BY last_completed_at DESC LIMIT $3`, []any{host, exclude, limit}
	if owner != "" {
		q, args = `SELECT host, owner, name FROM codebases
		WHERE host = $1 AND lower(owner) = lower($4) AND NOT is_stale AND inaccessible_since IS NULL
			AND last_completed_at IS NOT NULL AND id <> ALL($2) AND consecutive_failures = 0
		ORDER BY last_completed_at DESC LIMIT $3`, append(args, owner)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (repoid.ID, error) {
		var r repoid.ID
		err := row.Scan(&r.Host, &r.Owner, &r.Name)
		return r, err
	})
}

// ResetFailures clears the failure streak of the live codebase holding a
// name: a person asked for it again.
func (s *Store) ResetFailures(ctx context.Context, r repoid.ID, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE codebases SET consecutive_failures = 0, updated_at = $4
		WHERE host = $1 AND lower(owner) = lower($2) AND lower(name) = lower($3) AND NOT is_stale AND consecutive_failures > 0`,
		r.Host, r.Owner, r.Name, now)
	return err
}

// sweepResumeSetting names the settings row holding what the sweeps of a
// Carry hand on to the next.
func sweepResumeSetting(carry string) string { return "sweep-resume:" + carry }

// SweepResume is what the last sweep of carry left for the next (nil: none).
func (s *Store) SweepResume(ctx context.Context, carry string) ([]byte, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, sweepResumeSetting(carry)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// SetSweepResume replaces what the sweeps of carry hand on to the next.
func (s *Store) SetSweepResume(ctx context.Context, carry string, value []byte) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, sweepResumeSetting(carry), value)
	return err
}
