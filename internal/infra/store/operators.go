package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/shard"
)

// What an operator lists and undoes: parked shards, and codebases the
// re-collection sweep no longer refreshes (starter repos, starter shard).

// ParkedShard is a parked shard with what it scans and why it was parked.
type ParkedShard struct {
	ID  int64  `json:"shard"`
	Key string `json:"key"`
	// Repo is the codebase's repository (a collection's shard); Location
	// what a scan request's shard scans.
	Repo     *repoid.ID `json:"repository,omitempty"`
	Location string     `json:"location"`
	Reason   string     `json:"reason"`
	// Since is when it was parked (for shards parked before migration
	// 00013: when the shard row last changed).
	Since time.Time `json:"since"`
}

// ParkedShards lists up to limit parked shards, oldest first, and how many
// there are in all.
func (s *Store) ParkedShards(ctx context.Context, limit int) ([]ParkedShard, int64, error) {
	var out []ParkedShard
	var total int64
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM shards WHERE status = 'Parked'`).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT s.id, s.key, s.location, coalesce(s.park_reason, ''), coalesce(s.parked_at, s.updated_at),
				c.host, c.owner, c.name
			FROM shards s LEFT JOIN codebases c ON c.id = s.codebase_id
			WHERE s.status = 'Parked' ORDER BY s.id LIMIT $1`, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ParkedShard, error) {
			var p ParkedShard
			var host, owner, name *string
			err := row.Scan(&p.ID, &p.Key, &p.Location, &p.Reason, &p.Since, &host, &owner, &name)
			if host != nil && owner != nil && name != nil {
				p.Repo = &repoid.ID{Host: *host, Owner: *owner, Name: *name}
			}
			p.Since = p.Since.UTC()
			return p, err
		})
		return err
	})
	return out, total, err
}

// ExcludedCodebase is a live codebase the sweep no longer refreshes: its
// failures in a row reached decay.MaxFailures. Its last failed collection
// says why (none when change checks, not collections, failed).
type ExcludedCodebase struct {
	ID       int64     `json:"codebase"`
	Repo     repoid.ID `json:"repository"`
	Failures int       `json:"failures"`
	// LastFailure: when, in which class and with which message its last
	// collection failed.
	LastFailureAt *time.Time `json:"lastFailureAt,omitempty"`
	Class         string     `json:"class,omitempty"`
	Message       string     `json:"message,omitempty"`
}

// excludedQuery reads the partial index codebases_excluded (migration
// 00014), whose predicate holds decay.MaxFailures as a literal.
var excludedQuery = fmt.Sprintf(`SELECT c.id, c.host, c.owner, c.name, c.consecutive_failures, f.finished_at,
		coalesce(f.error_class, ''), coalesce(f.error_message, '')
	FROM codebases c
	LEFT JOIN LATERAL (SELECT finished_at, error_class, error_message FROM collections
		WHERE codebase_id = c.id AND status = 'failed' ORDER BY started_at DESC LIMIT 1) f ON true
	WHERE NOT c.is_stale AND c.consecutive_failures >= %d
	ORDER BY c.id LIMIT $1`, decay.MaxFailures)

// ExcludedCodebases lists up to limit codebases the sweep no longer
// refreshes, and how many there are in all.
func (s *Store) ExcludedCodebases(ctx context.Context, limit int) ([]ExcludedCodebase, int64, error) {
	var out []ExcludedCodebase
	var total int64
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM codebases WHERE NOT is_stale AND consecutive_failures >= %d`,
			decay.MaxFailures)).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, excludedQuery, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ExcludedCodebase, error) {
			var e ExcludedCodebase
			err := row.Scan(&e.ID, &e.Repo.Host, &e.Repo.Owner, &e.Repo.Name, &e.Failures, &e.LastFailureAt, &e.Class, &e.Message)
			return e, err
		})
		return err
	})
	return out, total, err
}

// Unpark makes a parked shard Active again: an operator retries it, and
// the next run continues it from its watermarks. It returns the shard as
// it was (nil if there is none) and whether it was parked.
func (s *Store) Unpark(ctx context.Context, shardID int64) (*Shard, bool, error) {
	var was *Shard
	parked := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if was, err = scanShard(tx.QueryRow(ctx, `SELECT `+shardColumns+` FROM shards WHERE id = $1 FOR UPDATE`, shardID)); err != nil || was == nil {
			return err
		}
		if was.Status != shard.Parked {
			return nil
		}
		parked = true
		_, err = tx.Exec(ctx, `UPDATE shards SET status = 'Active', park_reason = NULL, parked_at = NULL, updated_at = now()
			WHERE id = $1`, shardID)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return was, parked, err
}
