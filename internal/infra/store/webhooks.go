package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/repoid"
)

// CodebaseByExternalID returns the codebase of a host's repository id (a
// webhook names repositories by it), stale or not, or nil.
func (s *Store) CodebaseByExternalID(ctx context.Context, host, externalID string) (*Codebase, error) {
	return scanCodebase(s.pool.QueryRow(ctx, byExternalID, host, externalID))
}

// DeliveryHandled reports whether a webhook delivery (its GUID) was
// handed to Temporal already.
func (s *Store) DeliveryHandled(ctx context.Context, guid string) (bool, error) {
	var handled bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE guid = $1)`, guid).Scan(&handled)
	return handled, err
}

// RecordDelivery records a delivery handed to Temporal; recording it
// again changes nothing.
func (s *Store) RecordDelivery(ctx context.Context, guid, event string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_deliveries (guid, event) VALUES ($1, $2) ON CONFLICT (guid) DO NOTHING`, guid, event)
	return err
}

// ForgetDeliveries deletes the deliveries recorded before a time.
func (s *Store) ForgetDeliveries(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE received_at < $1`, before)
	return tag.RowsAffected(), err
}

// NoteEvents records that a webhook delivery named these repositories of
// a host (by id) now: the sweep checks them less often while events come.
func (s *Store) NoteEvents(ctx context.Context, host string, externalIDs []string) error {
	_, err := s.pool.Exec(ctx, `UPDATE codebases SET last_event_at = now() WHERE host = $1 AND external_repo_id = ANY($2)`, host, externalIDs)
	return err
}

// AccountCodebases lists a page of an account's live codebases of a host,
// by name (case-insensitively, as GitHub compares them), after the name
// after; the index of live names serves it.
func (s *Store) AccountCodebases(ctx context.Context, host, account, after string, limit int) ([]repoid.ID, error) {
	rows, err := s.pool.Query(ctx, `SELECT owner, name FROM codebases
		WHERE host = $1 AND lower(owner) = lower($2) AND NOT is_stale AND lower(name) > lower($3)
		ORDER BY lower(name) LIMIT $4`, host, account, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (repoid.ID, error) {
		id := repoid.ID{Host: host}
		return id, r.Scan(&id.Owner, &id.Name)
	})
}

// AccountCollected reports whether gitfleet collects any live repository
// of an account of a host.
func (s *Store) AccountCollected(ctx context.Context, host, account string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM codebases
		WHERE host = $1 AND lower(owner) = lower($2) AND NOT is_stale)`, host, account).Scan(&ok)
	return ok, err
}
