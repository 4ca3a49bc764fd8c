package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Triage (migration 00031): a secret of a subject — the shard's key, so a
// collected repository's secret keeps its state through renames and
// transfers, and through rule changes (new scopes hash the same secret to
// the same hash under one key version) — is open or resolved with a
// reason. Every change is a row of its history, never overwritten.

// Triage states: open, and the reasons a secret is resolved for, as
// GitHub's secret scanning alerts name them.
const (
	StateOpen          = "open"
	StateRevoked       = "revoked"
	StateFalsePositive = "false_positive"
	StateUsedInTests   = "used_in_tests"
	StateWontFix       = "wont_fix"
)

// Reasons are the states a secret is resolved to.
var Reasons = []string{StateRevoked, StateFalsePositive, StateUsedInTests, StateWontFix}

// ErrNoChange: the secret is already in the state asked for (reopening
// an open secret).
var ErrNoChange = errors.New("no change")

// StateChange is one change of a secret's state.
type StateChange struct {
	State   string    `json:"state"`
	Actor   string    `json:"by"`
	At      time.Time `json:"at"`
	Comment string    `json:"comment,omitempty"`
}

// SecretMatch is a secret of a scope whose hash starts with a prefix.
type SecretMatch struct {
	SecretKey
	Preview string   `json:"preview"`
	Where   Location `json:"first"`
}

// MatchSecrets lists the secrets of scope whose hash starts with prefix
// (hex, lower case), of rule unless rule is empty; at most limit.
func (s *Store) MatchSecrets(ctx context.Context, scopeID int64, prefix, rule string, limit int) ([]SecretMatch, error) {
	rows, err := s.pool.Query(ctx, `SELECT x.rule_id, x.secret_hash, x.secret_path, f.preview, f.path, f.archive, f.line, f.commit_id
		FROM secrets x JOIN findings f ON f.id = x.first_id
		WHERE x.scope_id = $1 AND x.secret_hash <> '' AND starts_with(x.secret_hash, $2) AND ($3 = '' OR x.rule_id = $3)
		ORDER BY x.first_id LIMIT $4`, scopeID, prefix, rule, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (SecretMatch, error) {
		var m SecretMatch
		err := row.Scan(&m.RuleID, &m.SecretHash, &m.File, &m.Preview, &m.Where.Path, &m.Where.Archive, &m.Where.Line, &m.Where.Commit)
		return m, err
	})
}

// SetSecretState records a change of a secret's state, found in scope,
// the latest of subject's shard: resolving it (state one of Reasons)
// remembers the blobs that hold it now, so that one found since is seen
// again; reopening an open secret (or one never resolved) is ErrNoChange.
func (s *Store) SetSecretState(ctx context.Context, subject string, scopeID int64, key SecretKey, c StateChange) (StateChange, error) {
	if c.State != StateOpen && !isReason(c.State) {
		return StateChange{}, fmt.Errorf("unknown state %q", c.State)
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var current string
		err := tx.QueryRow(ctx, `SELECT state FROM secret_states WHERE subject = $1 AND rule_id = $2 AND secret_hash = $3 AND secret_path = $4
			FOR UPDATE`, subject, key.RuleID, key.SecretHash, key.File).Scan(&current)
		if errors.Is(err, pgx.ErrNoRows) {
			current = StateOpen
		} else if err != nil {
			return err
		}
		if c.State == StateOpen && current == StateOpen {
			return ErrNoChange
		}
		if err := tx.QueryRow(ctx, `INSERT INTO secret_state_history (subject, rule_id, secret_hash, secret_path, state, actor, changed_at, comment)
			VALUES ($1, $2, $3, $4, $5, $6, now(), $7) RETURNING changed_at`,
			subject, key.RuleID, key.SecretHash, key.File, c.State, c.Actor, c.Comment).Scan(&c.At); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO secret_states AS s (subject, rule_id, secret_hash, secret_path, state, actor, changed_at, comment, known_blobs)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
				CASE WHEN $5 = 'open' THEN '{}'::bytea[] ELSE ARRAY(SELECT DISTINCT blob FROM findings
					WHERE scope_id = $9 AND rule_id = $2 AND secret_hash = $3 AND secret_path = $4) END)
			ON CONFLICT (subject, rule_id, secret_hash, secret_path) DO UPDATE SET state = excluded.state, actor = excluded.actor,
				changed_at = excluded.changed_at, comment = excluded.comment, known_blobs = excluded.known_blobs`,
			subject, key.RuleID, key.SecretHash, key.File, c.State, c.Actor, c.At, c.Comment, scopeID)
		return err
	})
	return c, err
}

func isReason(state string) bool {
	for _, r := range Reasons {
		if r == state {
			return true
		}
	}
	return false
}

// SecretHistory is every change of a secret's state, oldest first.
func (s *Store) SecretHistory(ctx context.Context, subject string, key SecretKey) ([]StateChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, actor, changed_at, comment FROM secret_state_history
		WHERE subject = $1 AND rule_id = $2 AND secret_hash = $3 AND secret_path = $4 ORDER BY id`,
		subject, key.RuleID, key.SecretHash, key.File)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (StateChange, error) {
		var c StateChange
		err := row.Scan(&c.State, &c.Actor, &c.At, &c.Comment)
		return c, err
	})
}

// Triage is where a secret stands in triage.
type Triage struct {
	State     string
	SeenAgain bool
}

// SecretStates are the triage states of keys, secrets of subject found
// in scope; a secret never resolved is open.
func (s *Store) SecretStates(ctx context.Context, subject string, scopeID int64, keys []SecretKey) (map[SecretKey]Triage, error) {
	out := make(map[SecretKey]Triage, len(keys))
	rules, hashes, paths := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		out[k] = Triage{State: StateOpen}
		rules[i], hashes[i], paths[i] = k.RuleID, k.SecretHash, k.File
	}
	rows, err := s.pool.Query(ctx, `SELECT st.rule_id, st.secret_hash, st.secret_path, st.state,
			st.state <> 'open' AND EXISTS (SELECT 1 FROM findings o WHERE o.scope_id = $2 AND o.rule_id = st.rule_id
				AND o.secret_hash = st.secret_hash AND o.secret_path = st.secret_path AND o.blob <> ALL (st.known_blobs))
		FROM secret_states st JOIN unnest($3::text[], $4::text[], $5::text[]) AS k(r, h, p)
			ON st.rule_id = k.r AND st.secret_hash = k.h AND st.secret_path = k.p
		WHERE st.subject = $1`, subject, scopeID, rules, hashes, paths)
	if err != nil {
		return nil, err
	}
	var k SecretKey
	var t Triage
	_, err = pgx.ForEachRow(rows, []any{&k.RuleID, &k.SecretHash, &k.File, &t.State, &t.SeenAgain}, func() error {
		out[k] = t
		return nil
	})
	return out, err
}
