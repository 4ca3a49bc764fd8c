package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/notify"
)

// Alerts (migration 00055, architecture §8 "Alerts"): messages to the
// receivers of GITFLEET_NOTIFY_URL, and the secrets each announced.

// NotificationMessage is a message to one receiver (by its URL's
// digest).
type NotificationMessage struct {
	ID        string
	URLDigest string
	Kind      notify.Kind
	ShardID   int64
	Body      []byte
	Alerts    int
	State     string
	Attempts  int
}

// Message states.
const (
	MessagePending = "pending"
	MessageSent    = "sent"
	MessageRefused = "refused"
)

// MaxAlertCandidates bounds the secrets one message stands for.
const MaxAlertCandidates = 5000

// AlertCandidates are the secrets of a shard an alert of kind may
// announce: open, not suppressed, in its newest scope; for KindNew first
// seen at or after since, for KindValid found valid by their last check.
// Which were announced already is left to ClaimNotification.
func (s *Store) AlertCandidates(ctx context.Context, shardID int64, kind notify.Kind, since time.Time) ([]FleetSecret, error) {
	f := FleetFilter{ShardID: shardID, States: []string{StateOpen}}
	switch kind {
	case notify.KindValid:
		f.Validity = []string{"valid"}
	default:
		f.Since = since
	}
	xs, err := s.FleetSecrets(ctx, f, Page{Limit: MaxAlertCandidates})
	if err != nil {
		return nil, err
	}
	// Oldest first: a message lists them in the order they were found.
	for i, j := 0, len(xs)-1; i < j; i, j = i+1, j-1 {
		xs[i], xs[j] = xs[j], xs[i]
	}
	return xs, nil
}

// errNothingToClaim rolls a claim back.
var errNothingToClaim = errors.New("nothing to claim")

// ClaimNotification writes message id for the receiver urlDigest, standing
// for the secrets of fingerprints that no message of kind claimed for it
// before, in one transaction: build makes the body of those (won). A
// message already written under id (a retried activity) is returned as it
// is; nil when every secret was claimed before (nothing to send).
func (s *Store) ClaimNotification(ctx context.Context, id, urlDigest string, kind notify.Kind, shardID int64, fingerprints []string,
	build func(won map[string]bool) ([]byte, int, error)) (*NotificationMessage, error) {
	if m, err := s.NotificationMessage(ctx, id); err != nil || m != nil {
		return m, err
	}
	var m *NotificationMessage
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO notification_messages (id, url_digest, kind, shard_id, body, alerts)
			VALUES ($1, $2, $3, $4, '', 0)`, id, urlDigest, string(kind), shardID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `INSERT INTO notification_alerts (fingerprint, url_digest, kind, message_id)
			SELECT f, $2, $3, $4 FROM unnest($1::text[]) AS t(f)
			ON CONFLICT DO NOTHING RETURNING fingerprint`, fingerprints, urlDigest, string(kind), id)
		if err != nil {
			return err
		}
		won, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(won) == 0 {
			return errNothingToClaim
		}
		set := make(map[string]bool, len(won))
		for _, f := range won {
			set[f] = true
		}
		body, n, err := build(set)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE notification_messages SET body = $2, alerts = $3 WHERE id = $1`, id, string(body), n); err != nil {
			return err
		}
		m = &NotificationMessage{ID: id, URLDigest: urlDigest, Kind: kind, ShardID: shardID, Body: body, Alerts: n, State: MessagePending}
		return nil
	})
	if errors.Is(err, errNothingToClaim) {
		return nil, nil
	}
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "23505" { // the same id, written meanwhile by a racing attempt
		return s.NotificationMessage(ctx, id)
	}
	return m, err
}

// NotificationMessage is the message id (nil: none).
func (s *Store) NotificationMessage(ctx context.Context, id string) (*NotificationMessage, error) {
	var m NotificationMessage
	var kind, body string
	err := s.pool.QueryRow(ctx, `SELECT id, url_digest, kind, shard_id, body, alerts, state, attempts FROM notification_messages WHERE id = $1`,
		id).Scan(&m.ID, &m.URLDigest, &kind, &m.ShardID, &body, &m.Alerts, &m.State, &m.Attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	m.Kind, m.Body = notify.Kind(kind), []byte(body)
	return &m, err
}

// ReserveSend takes a slot of the fleet-wide rate bound of the receiver
// urlDigest (perMinute messages a minute; 0: none), by the database's
// clock and under a lock per receiver, so that workers racing share it:
// 0 when the slot is taken (the send may go), else how long to wait.
func (s *Store) ReserveSend(ctx context.Context, urlDigest string, perMinute int) (time.Duration, error) {
	var wait time.Duration
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('gitfleet-notify:' || $1, 0))`, urlDigest); err != nil {
			return err
		}
		// The time after the lock, not the transaction's start (now()): a
		// transaction that began earlier but took the lock later must not
		// see a send recorded after its own start, and wait past the window.
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM notification_sends WHERE url_digest = $1 AND sent_at < $2::timestamptz - interval '1 minute'`,
			urlDigest, now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT sent_at FROM notification_sends WHERE url_digest = $1`, urlDigest)
		if err != nil {
			return err
		}
		sent, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			return err
		}
		if wait = notify.Wait(sent, now, perMinute); wait > 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO notification_sends (url_digest, sent_at) VALUES ($1, $2)`, urlDigest, now)
		return err
	})
	return wait, err
}

// MessageAttempted counts an attempt at sending message id, and records
// its outcome: sent, refused (its secrets are released, so a later scan
// or check may announce them again), or still pending.
func (s *Store) MessageAttempted(ctx context.Context, id, state string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE notification_messages SET attempts = attempts + 1, state = $2,
				sent_at = CASE WHEN $2 = 'sent' THEN now() ELSE sent_at END
			WHERE id = $1 AND state = 'pending'`, id, state); err != nil {
			return err
		}
		if state != MessageRefused {
			return nil
		}
		_, err := tx.Exec(ctx, `DELETE FROM notification_alerts WHERE message_id = $1`, id)
		return err
	})
}
