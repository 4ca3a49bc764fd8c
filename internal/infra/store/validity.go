package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Validity checks (migration 00041): the last answer of a secret's
// provider, keyed as triage keys a secret (the shard's key, rule, hash,
// path). The secret itself is never here; the check reads it again from
// the mirror (ValidationTarget: the blob and span its finding records).

// ValidityActor is who resolves a secret found revoked.
const ValidityActor = "gitfleet (validity check)"

// ValidationFilter selects the secrets a ValidateSecrets run checks.
type ValidationFilter struct {
	// ShardID: one shard's (0: the fleet's).
	ShardID int64
	// SecretHash: this secret only ("": any).
	SecretHash string
	// Rules: the rules some enabled validator takes.
	Rules []string
	// Unchecked: only secrets never checked (after a scan).
	Unchecked bool
}

// ValidationCandidate is a secret to check, by its first finding: where
// the check reads it (the shard's repository) and the keyset cursor.
type ValidationCandidate struct {
	ScopeID   int64
	FindingID int64
	ShardID   int64
	// Host, Owner, Name: the codebase of a collected repository ("" for a
	// scan target, whose Location says where it is).
	Host, Owner, Name string
	Location          string
}

// ValidationCandidates pages the secrets of each shard's newest scope that
// f selects, open or resolved revoked (a revoked key can come back; one
// resolved as a false positive, used in tests or won't fix is not asked
// about), after the cursor (scope, first finding), at most limit.
func (s *Store) ValidationCandidates(ctx context.Context, f ValidationFilter, afterScope, afterFinding int64, limit int) ([]ValidationCandidate, error) {
	if len(f.Rules) == 0 {
		return nil, nil
	}
	// Only the conditions f asks for, no "$n = 0 OR …": a prepared
	// statement's generic plan could not drop them, and walked every
	// secret of the fleet for each page (seconds a page at 100,000).
	args := []any{afterScope, afterFinding, f.Rules, limit}
	conds := []string{`(x.scope_id, x.first_id) > ($1, $2)`, `x.rule_id = ANY($3::text[])`, `x.secret_hash <> ''`}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.ShardID != 0 {
		conds = append(conds, "sc.shard_id = "+arg(f.ShardID))
	}
	if f.SecretHash != "" {
		conds = append(conds, "x.secret_hash = "+arg(f.SecretHash))
	}
	if f.Unchecked {
		conds = append(conds, `NOT EXISTS (SELECT 1 FROM secret_validity v WHERE v.subject = sh.key AND v.rule_id = x.rule_id
			AND v.secret_hash = x.secret_hash AND v.secret_path = x.secret_path)`)
	}
	rows, err := s.pool.Query(ctx, `SELECT x.scope_id, x.first_id, sh.id, coalesce(cb.host, ''), coalesce(cb.owner, ''), coalesce(cb.name, ''), sh.location
		FROM secrets x
		JOIN scan_scopes sc ON sc.id = x.scope_id
		JOIN shards sh ON sh.id = sc.shard_id
		LEFT JOIN codebases cb ON cb.id = sh.codebase_id
		WHERE `+strings.Join(conds, " AND ")+`
			AND NOT EXISTS (SELECT 1 FROM scan_scopes n WHERE n.shard_id = sc.shard_id AND n.id > sc.id) AND sh.key NOT LIKE 'purge:%'
			AND coalesce((SELECT st.state FROM secret_states st WHERE st.subject = sh.key AND st.rule_id = x.rule_id
				AND st.secret_hash = x.secret_hash AND st.secret_path = x.secret_path), 'open') IN ('open', 'revoked')
		ORDER BY x.scope_id, x.first_id LIMIT $4`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ValidationCandidate, error) {
		var c ValidationCandidate
		err := row.Scan(&c.ScopeID, &c.FindingID, &c.ShardID, &c.Host, &c.Owner, &c.Name, &c.Location)
		return c, err
	})
}

// Span is where a secret lies in a blob.
type Span struct {
	Blob       []byte
	Start, End int
	// Decoded, Archive: the secret was found in decoded text or in a file
	// of an archive; the span is not the secret's own bytes.
	Decoded, Archive string
	SecretHash       string
}

// ValidationTarget is what a check of a secret needs, but the secret.
type ValidationTarget struct {
	Subject  string
	ScopeID  int64
	Key      SecretKey
	Span     Span
	Location string
	Local    bool
	// Pairs are the spans of pairRules' findings in the same blob (AWS:
	// the secret access keys beside a key id), nearest first.
	Pairs []Span
}

// ErrNoFinding: the finding is gone (its scope was replaced).
var ErrNoFinding = errors.New("no such finding")

// ValidationTarget reads finding id's secret key, span, shard, and the
// spans of pairRules' findings in the same blob.
func (s *Store) ValidationTarget(ctx context.Context, findingID int64, pairRules []string) (ValidationTarget, error) {
	var t ValidationTarget
	err := s.pool.QueryRow(ctx, `SELECT sh.key, f.scope_id, f.rule_id, f.secret_hash, f.secret_path, f.blob, f.start_offset, f.end_offset,
			f.decoded, f.archive, sh.location, sh.local
		FROM findings f JOIN scan_scopes sc ON sc.id = f.scope_id JOIN shards sh ON sh.id = sc.shard_id WHERE f.id = $1`, findingID).
		Scan(&t.Subject, &t.ScopeID, &t.Key.RuleID, &t.Key.SecretHash, &t.Key.File, &t.Span.Blob, &t.Span.Start, &t.Span.End,
			&t.Span.Decoded, &t.Span.Archive, &t.Location, &t.Local)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNoFinding
	}
	if err != nil {
		return t, err
	}
	t.Span.SecretHash = t.Key.SecretHash
	if len(pairRules) == 0 {
		return t, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT blob, start_offset, end_offset, decoded, archive, secret_hash FROM findings
		WHERE scope_id = $1 AND blob = $2 AND rule_id = ANY($3::text[]) ORDER BY abs(start_offset - $4), start_offset LIMIT 8`,
		t.ScopeID, t.Span.Blob, pairRules, t.Span.Start)
	if err != nil {
		return t, err
	}
	t.Pairs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Span, error) {
		var p Span
		err := row.Scan(&p.Blob, &p.Start, &p.End, &p.Decoded, &p.Archive, &p.SecretHash)
		return p, err
	})
	return t, err
}

// Validity is a secret's last check.
type Validity struct {
	Provider  string          `json:"provider"`
	State     string          `json:"state"`
	Class     string          `json:"class,omitempty"`
	Detail    string          `json:"detail,omitempty"`
	Facts     json.RawMessage `json:"facts,omitempty"`
	CheckedAt time.Time       `json:"checkedAt"`
	ValidAt   *time.Time      `json:"validAt,omitempty"`
	RevokedAt *time.Time      `json:"revokedAt,omitempty"`
}

// RecordValidity stores a check of subject's secret key, found in scope.
// A secret seen valid before and invalid now is revoked at this check
// (revoked reports it), and if it is open in triage it is resolved
// revoked, saying so; valid again, it is no longer revoked (its triage is
// left to people).
func (s *Store) RecordValidity(ctx context.Context, subject string, scopeID int64, key SecretKey, v Validity) (revoked bool, err error) {
	if len(v.Facts) == 0 {
		v.Facts = json.RawMessage(`{}`)
	}
	var validAt *time.Time
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var prev string
		var revokedAt *time.Time
		err := tx.QueryRow(ctx, `SELECT state, valid_at, revoked_at FROM secret_validity
			WHERE subject = $1 AND rule_id = $2 AND secret_hash = $3 AND secret_path = $4 FOR UPDATE`,
			subject, key.RuleID, key.SecretHash, key.File).Scan(&prev, &validAt, &revokedAt)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		revoked = v.State == "invalid" && validAt != nil && revokedAt == nil
		_, err = tx.Exec(ctx, `INSERT INTO secret_validity AS s (subject, rule_id, secret_hash, secret_path, provider, state, error_class,
				detail, facts, checked_at, valid_at, revoked_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now(), CASE WHEN $6 = 'valid' THEN now() END, NULL)
			ON CONFLICT (subject, rule_id, secret_hash, secret_path) DO UPDATE SET provider = excluded.provider,
				state = excluded.state, error_class = excluded.error_class, detail = excluded.detail,
				-- an unknown says nothing new about the credential: its facts stay
				facts = CASE WHEN excluded.state = 'unknown' THEN s.facts ELSE excluded.facts END,
				checked_at = excluded.checked_at,
				valid_at = coalesce(excluded.valid_at, s.valid_at),
				revoked_at = CASE WHEN excluded.state = 'valid' THEN NULL
					WHEN excluded.state = 'invalid' AND s.valid_at IS NOT NULL THEN coalesce(s.revoked_at, excluded.checked_at)
					ELSE s.revoked_at END`,
			subject, key.RuleID, key.SecretHash, key.File, v.Provider, v.State, v.Class, v.Detail, []byte(v.Facts))
		return err
	})
	if err != nil || !revoked {
		return revoked, err
	}
	states, err := s.SecretStates(ctx, subject, scopeID, []SecretKey{key})
	if err != nil {
		return revoked, err
	}
	if states[key].State != StateOpen {
		return revoked, nil
	}
	_, err = s.SetSecretState(ctx, subject, scopeID, key, StateChange{State: StateRevoked, Actor: ValidityActor,
		Comment: fmt.Sprintf("resolved automatically: %s accepted it at %s and refused it at the next check",
			v.Provider, validAt.UTC().Format(time.RFC3339))})
	return revoked, err
}

// Validities are the last checks of subject's secrets keys (absent: never
// checked).
func (s *Store) Validities(ctx context.Context, subjects []string, keys []SecretKey) (map[string]map[SecretKey]Validity, error) {
	out := map[string]map[SecretKey]Validity{}
	if len(keys) == 0 {
		return out, nil
	}
	rules, hashes, paths := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		rules[i], hashes[i], paths[i] = k.RuleID, k.SecretHash, k.File
	}
	rows, err := s.pool.Query(ctx, `SELECT v.subject, v.rule_id, v.secret_hash, v.secret_path, v.provider, v.state, v.error_class, v.detail,
			v.facts, v.checked_at, v.valid_at, v.revoked_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(subject, rule_id, secret_hash, secret_path)
		JOIN secret_validity v USING (subject, rule_id, secret_hash, secret_path)`, subjects, rules, hashes, paths)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var subject string
		var k SecretKey
		var v Validity
		var facts []byte
		if err := rows.Scan(&subject, &k.RuleID, &k.SecretHash, &k.File, &v.Provider, &v.State, &v.Class, &v.Detail, &facts,
			&v.CheckedAt, &v.ValidAt, &v.RevokedAt); err != nil {
			return nil, err
		}
		v.Facts = facts
		if out[subject] == nil {
			out[subject] = map[SecretKey]Validity{}
		}
		out[subject][k] = v
	}
	return out, rows.Err()
}

// RuleOfFinding is the rule of finding id.
func (s *Store) RuleOfFinding(ctx context.Context, id int64) (string, error) {
	var rule string
	err := s.pool.QueryRow(ctx, `SELECT rule_id FROM findings WHERE id = $1`, id).Scan(&rule)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNoFinding
	}
	return rule, err
}

// ValidityFilters are what FleetFilter.Validity takes.
var ValidityFilters = []string{"valid", "invalid", "unknown", "revoked", "unchecked"}

// validityCond is the fleet query's condition for FleetFilter.Validity,
// over x (secrets) and sh (its shard); arg adds an argument.
func validityCond(want []string, arg func(any) string) string {
	var states []string
	revoked, unchecked := false, false
	for _, w := range want {
		switch w {
		case "revoked":
			revoked = true
		case "unchecked":
			unchecked = true
		default:
			states = append(states, w)
		}
	}
	const match = `v.subject = sh.key AND v.rule_id = x.rule_id AND v.secret_hash = x.secret_hash AND v.secret_path = x.secret_path`
	c := "EXISTS (SELECT 1 FROM secret_validity v WHERE " + match + " AND (v.state = ANY(" + arg(states) + "::text[])"
	if revoked {
		c += " OR v.revoked_at IS NOT NULL"
	}
	c += "))"
	if unchecked {
		c = "(" + c + " OR NOT EXISTS (SELECT 1 FROM secret_validity v WHERE " + match + "))"
	}
	return c
}

// fillValidity sets the last check of each secret of xs.
func (s *Store) fillValidity(ctx context.Context, xs []FleetSecret) error {
	if len(xs) == 0 {
		return nil
	}
	subjects, keys := make([]string, len(xs)), make([]SecretKey, len(xs))
	for i, x := range xs {
		subjects[i], keys[i] = x.Subject, x.SecretKey
	}
	vs, err := s.Validities(ctx, subjects, keys)
	if err != nil {
		return err
	}
	for i := range xs {
		if v, ok := vs[xs[i].Subject][xs[i].SecretKey]; ok {
			xs[i].Validity = &v
		}
	}
	return nil
}

// ValiditySummary counts the secrets f selects by their last check:
// valid first — the ones to act on.
type ValiditySummary struct {
	Valid     int64 `json:"valid"`
	Invalid   int64 `json:"invalid"`
	Revoked   int64 `json:"revoked"`
	Unknown   int64 `json:"unknown"`
	Unchecked int64 `json:"unchecked"`
}

// SummarizeValidity counts the secrets f selects by validity.
func (s *Store) SummarizeValidity(ctx context.Context, f FleetFilter) (ValiditySummary, error) {
	where, args := f.where(nil)
	var out ValiditySummary
	err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE v.state = 'valid'), count(*) FILTER (WHERE v.state = 'invalid'),
			count(*) FILTER (WHERE v.revoked_at IS NOT NULL), count(*) FILTER (WHERE v.state = 'unknown'), count(*) FILTER (WHERE v.state IS NULL)
		FROM `+fleetFrom+`
			LEFT JOIN secret_validity v ON v.subject = sh.key AND v.rule_id = x.rule_id AND v.secret_hash = x.secret_hash
				AND v.secret_path = x.secret_path
		WHERE `+where, args...).Scan(&out.Valid, &out.Invalid, &out.Revoked, &out.Unknown, &out.Unchecked)
	return out, err
}
