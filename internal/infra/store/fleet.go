package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/report"
	"gitfleet/internal/domain/suppress"
)

// The fleet view reads secrets (migration 00033), one row per secret of a
// scope kept by the findings' inserts, of each shard's newest scope: no
// query groups the findings themselves, so a page or a summary of a
// million occurrences reads indexes (BenchmarkFleetFindings).

// FleetFilter selects secrets of the fleet. Its zero value selects every
// secret no suppression applies to.
type FleetFilter struct {
	// ShardID: one shard's secrets (0: every shard's).
	ShardID int64
	// Repo is a glob on the repository's host/owner/name (a scan target's
	// location), case-insensitive: * any run of characters, ? one.
	Repo string
	// Rules: secrets of these rules only (nil: every rule).
	Rules []string
	// SecretHash: this secret only ("": any).
	SecretHash string
	// States: open, resolved (any reason), or reasons (nil: any state).
	States []string
	// Presence: present, removed or unknown only ("": any).
	Presence PresenceStatus
	// Since: first seen at or after.
	Since time.Time
	// Decoded: only secrets found in decoded text (true) or only those
	// found as written (false).
	Decoded *bool
	// SeenAgain: only resolved secrets met in a new blob since.
	SeenAgain bool
	// Ignored: also the secrets every occurrence of which is suppressed
	// by the repository (.gitleaksignore, gitleaks:allow); IgnoredOnly:
	// those alone.
	Ignored, IgnoredOnly bool
	// Validity: only secrets whose last check found one of these (valid,
	// invalid, unknown), revoked ones, or unchecked ones (nil: any).
	Validity []string
}

// FleetSecret is a secret of the fleet: where it is, where first and last
// seen, and its triage state.
type FleetSecret struct {
	Secret
	Repository string `json:"repository"`
	// Subject is the shard's key, which triage keys the secret by.
	Subject string    `json:"-"`
	ShardID int64     `json:"shard"`
	ScopeID int64     `json:"-"`
	FirstAt time.Time `json:"firstSeenAt"`
	// Ignored is the suppression every occurrence has ("" when one has
	// none); IgnoredOccurrences counts those with one.
	Ignored            string `json:"ignored,omitempty"`
	IgnoredOccurrences int64  `json:"ignoredOccurrences,omitempty"`
	// State is open or a reason; StateBy, StateAt and Comment the last
	// change (none while it was never resolved).
	State     string     `json:"state"`
	StateBy   string     `json:"stateBy,omitempty"`
	StateAt   *time.Time `json:"stateAt,omitempty"`
	Comment   string     `json:"comment,omitempty"`
	SeenAgain bool       `json:"seenAgainAfterResolution,omitempty"`
	// Validity is the last check with its provider (nil: never checked).
	Validity *Validity `json:"validity,omitempty"`
}

// Fragments of the fleet queries over x (secrets), sc (its scope), sh (its
// shard), cb (its codebase, if any), st (its triage state, if any).
const (
	fleetFrom = `secrets x
		JOIN scan_scopes sc ON sc.id = x.scope_id
		JOIN shards sh ON sh.id = sc.shard_id
		LEFT JOIN codebases cb ON cb.id = sh.codebase_id
		LEFT JOIN secret_states st ON st.subject = sh.key AND st.rule_id = x.rule_id AND st.secret_hash = x.secret_hash
			AND st.secret_path = x.secret_path`
	// The newest scope of a shard that is not being purged.
	fleetLatest = `NOT EXISTS (SELECT 1 FROM scan_scopes n WHERE n.shard_id = sc.shard_id AND n.id > sc.id) AND sh.key NOT LIKE 'purge:%'`
	fleetRepo   = `CASE WHEN cb.id IS NULL THEN sh.location ELSE cb.host || '/' || cb.owner || '/' || cb.name END`
	fleetState  = `coalesce(st.state, 'open')`
	// The occurrences of x.
	fleetOccurrences = `findings o WHERE o.scope_id = x.scope_id AND o.rule_id = x.rule_id AND o.secret_hash = x.secret_hash
		AND o.secret_path = x.secret_path`
	// A scalar subquery with LIMIT, not EXISTS: the planner may run an
	// EXISTS as one hashed pass over every finding, where a page needs a
	// probe per row.
	fleetSeenAgain = `(st.state IS NOT NULL AND st.state <> 'open' AND (SELECT 1 FROM ` + fleetOccurrences + `
		AND o.blob <> ALL (st.known_blobs) LIMIT 1) IS NOT NULL)`
	// secrets.present is kept by each presence computation (and the
	// inserts' trigger).
	fleetPresence = `CASE WHEN x.present THEN 'present' WHEN x.last_id <= sc.presence_upto THEN 'removed' ELSE 'unknown' END`
)

// where is the filter's condition and its arguments, numbered from the
// first.
func (f FleetFilter) where(args []any) (string, []any) {
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	conds := []string{fleetLatest}
	if f.ShardID != 0 {
		conds = append(conds, "sc.shard_id = "+arg(f.ShardID))
	}
	if f.Repo != "" {
		conds = append(conds, "lower("+fleetRepo+") LIKE "+arg(globLike(strings.ToLower(f.Repo)))+` ESCAPE '\'`)
	}
	if f.Rules != nil {
		conds = append(conds, "x.rule_id = ANY("+arg(f.Rules)+"::text[])")
	}
	if f.SecretHash != "" {
		conds = append(conds, "x.secret_hash = "+arg(f.SecretHash))
	}
	if f.States != nil {
		states, resolved := []string{}, false
		for _, s := range f.States {
			if s == "resolved" {
				resolved = true
			} else {
				states = append(states, s)
			}
		}
		c := fleetState + " = ANY(" + arg(states) + "::text[])"
		if resolved {
			c = "(" + c + " OR " + fleetState + " <> 'open')"
		}
		conds = append(conds, c)
	}
	switch f.Presence {
	case "":
	case Present:
		conds = append(conds, "x.present")
	default:
		conds = append(conds, "NOT x.present AND ("+fleetPresence+") = "+arg(string(f.Presence)))
	}
	if !f.Since.IsZero() {
		conds = append(conds, "x.first_at >= "+arg(f.Since))
	}
	if f.Decoded != nil {
		op := "="
		if *f.Decoded {
			op = "<>"
		}
		conds = append(conds, "(SELECT d.decoded FROM findings d WHERE d.id = x.first_id) "+op+" ''")
	}
	if f.SeenAgain {
		conds = append(conds, fleetSeenAgain)
	}
	if f.Validity != nil {
		conds = append(conds, validityCond(f.Validity, arg))
	}
	switch {
	case f.IgnoredOnly:
		conds = append(conds, "x.ignored <> ''")
	case !f.Ignored:
		conds = append(conds, "x.ignored = ''")
	}
	return strings.Join(conds, " AND "), args
}

// listSQL is FleetSecrets' query.
func (f FleetFilter) listSQL(page Page) (string, []any) {
	where, args := f.where(nil)
	args = append(args, page.After, page.limit())
	n := len(args)
	return `SELECT x.first_id, x.scope_id, sc.shard_id, sh.key, ` + fleetRepo + `, x.rule_id, x.secret_hash, x.secret_path,
			x.first_at, x.ignored, (SELECT count(*) FROM ` + fleetOccurrences + `),
			(SELECT count(*) FROM ` + fleetOccurrences + ` AND o.ignored <> ''), ` + fleetPresence + `,
			fi.path, fi.archive, fi.line, fi.commit_id, fi.preview, fi.decoded, la.path, la.archive, la.line, la.commit_id,
			` + fleetState + `, coalesce(st.actor, ''), st.changed_at, coalesce(st.comment, ''), ` + fleetSeenAgain + `
		FROM ` + fleetFrom + `
			JOIN findings fi ON fi.id = x.first_id JOIN findings la ON la.id = x.last_id
		WHERE ` + where + fmt.Sprintf(` AND ($%d = 0 OR x.first_id < $%d)
		ORDER BY x.first_id DESC LIMIT $%d`, n-1, n-1, n), args
}

// globLike is a glob as a LIKE pattern: * any run, ? one character, the
// rest literal.
func globLike(glob string) string {
	var b strings.Builder
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteByte('%')
		case '?':
			b.WriteByte('_')
		case '%', '_', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// FleetSecrets lists the secrets f selects, newest first (by their first
// occurrence), a page at a time: page.After is the Cursor of the last
// secret of the page before (0: from the newest), at most page.Limit of
// them (0: all).
func (s *Store) FleetSecrets(ctx context.Context, f FleetFilter, page Page) ([]FleetSecret, error) {
	sql, args := f.listSQL(page)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	xs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FleetSecret, error) {
		var x FleetSecret
		err := row.Scan(&x.Cursor, &x.ScopeID, &x.ShardID, &x.Subject, &x.Repository, &x.RuleID, &x.SecretHash, &x.File,
			&x.FirstAt, &x.Ignored, &x.Occurrences, &x.IgnoredOccurrences, &x.Status,
			&x.Path, &x.Archive, &x.Line, &x.Commit, &x.Preview, &x.Decoded, &x.Last.Path, &x.Last.Archive, &x.Last.Line, &x.Last.Commit,
			&x.State, &x.StateBy, &x.StateAt, &x.Comment, &x.SeenAgain)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	return xs, s.fillValidity(ctx, xs)
}

// Count is a name and how many.
type Count struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// FleetSummary counts the secrets f selects.
type FleetSummary struct {
	Secrets int64 `json:"secrets"`
	// ByState counts by triage state (open and each reason).
	ByState []Count `json:"byState"`
	// SeenAgain: resolved secrets met in a new blob since.
	SeenAgain int64 `json:"seenAgainAfterResolution"`
	// Ignored: secrets every occurrence of which is suppressed, which f
	// left out unless it asked for them.
	Ignored int64 `json:"ignored"`
	// ByFamily and ByRepository are the top counts, largest first.
	ByFamily     []Count `json:"byFamily"`
	ByRepository []Count `json:"byRepository"`
	// Repositories counts those with a secret.
	Repositories int64 `json:"repositories"`
}

// RuleFamily is the family of a rule: its id up to the first '-'
// (github-pat, github-oauth → github), gitfleet's own rules' after the
// "gitfleet-" prefix.
func RuleFamily(ruleID string) string {
	id := strings.TrimPrefix(ruleID, "gitfleet-")
	family, _, _ := strings.Cut(id, "-")
	return family
}

// Summary counts the secrets f selects by state, rule family and
// repository (the top of each), in one snapshot.
func (s *Store) Summary(ctx context.Context, f FleetFilter, top int) (FleetSummary, error) {
	out := FleetSummary{ByState: []Count{}, ByFamily: []Count{}, ByRepository: []Count{}}
	sql, args := f.summarySQL(top)
	byState, byFamily := map[string]int64{}, map[string]int64{}
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		// The grouping of a fleet's secrets sorts and hashes in memory.
		if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		var k, name string
		var c int64
		_, err = pgx.ForEachRow(rows, []any{&k, &name, &c}, func() error {
			switch k {
			case "ignored":
				out.Ignored += c
			case "seen":
				out.SeenAgain = c
			case "repositories":
				out.Repositories = c
			case "state":
				byState[name] += c
			case "rule":
				out.Secrets += c
				byFamily[RuleFamily(name)] += c
			case "repo":
				out.ByRepository = append(out.ByRepository, Count{name, c})
			}
			return nil
		})
		return err
	})
	if err != nil {
		return out, err
	}
	// States in the order triage names them, none left out; families
	// largest first.
	for _, st := range append([]string{StateOpen}, Reasons...) {
		out.ByState = append(out.ByState, Count{st, byState[st]})
	}
	for name, c := range byFamily {
		out.ByFamily = append(out.ByFamily, Count{name, c})
	}
	sort.Slice(out.ByFamily, func(i, j int) bool {
		x, y := out.ByFamily[i], out.ByFamily[j]
		return x.Count > y.Count || x.Count == y.Count && x.Name < y.Name
	})
	out.ByFamily = out.ByFamily[:min(len(out.ByFamily), top)]
	return out, nil
}

// summarySQL is Summary's query: rows of (kind, name, count).
//
// It reads the fleet's secrets once, grouped by rule and by shard but not
// by state (a), and the resolved ones apart, from secret_states (b): most
// secrets are open, and joining each to its state would cost a hash join
// of the whole fleet on four text columns. Open secrets are then a's
// counts less b's.
func (f FleetFilter) summarySQL(top int) (string, []any) {
	all := f
	all.States, all.SeenAgain, all.Ignored, all.IgnoredOnly = nil, false, true, false
	where, args := all.where(nil)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	openIn := !f.SeenAgain
	var states []string
	resolved := false
	if f.States != nil {
		openIn = false
		for _, st := range f.States {
			switch st {
			case StateOpen:
				openIn = !f.SeenAgain
			case "resolved":
				resolved = true
			default:
				states = append(states, st)
			}
		}
	} else {
		resolved = true
	}
	if states == nil {
		states = []string{}
	}
	// shown: which of a row's suppressed (ign) or not the listing counts.
	shown := fmt.Sprintf(`((%s OR NOT ign) AND (NOT %s OR ign))`, arg(f.Ignored || f.IgnoredOnly), arg(f.IgnoredOnly))
	kept := fmt.Sprintf(`((state = ANY(%s::text[]) OR %s) AND (NOT %s OR seen))`, arg(states), arg(resolved), arg(f.SeenAgain))
	open := arg(openIn)
	limit := arg(top)
	return `WITH a AS MATERIALIZED (
				SELECT GROUPING(x.rule_id, sc.shard_id) AS gs, x.ignored <> '' AS ign, x.rule_id, sc.shard_id, count(*) AS n
				FROM ` + fleetFrom + ` WHERE ` + where + `
				GROUP BY GROUPING SETS ((x.ignored <> '', x.rule_id), (x.ignored <> '', sc.shard_id))),
			b AS MATERIALIZED (
				SELECT x.ignored <> '' AS ign, st.state, x.rule_id, sc.shard_id, ` + fleetSeenAgain + ` AS seen
				FROM ` + fleetFrom + ` WHERE st.state <> 'open' AND ` + where + `),
			-- Secrets counted, by rule and by shard: a's when open ones count,
			-- less the resolved among them, plus the resolved kept.
			byrule AS (SELECT ign, rule_id, sum(n) AS n FROM (
					SELECT ign, rule_id, n FROM a WHERE gs = 1 AND ` + open + `
					UNION ALL SELECT ign, rule_id, -1 FROM b WHERE ` + open + `
					UNION ALL SELECT ign, rule_id, 1 FROM b WHERE ` + kept + `) u
				GROUP BY ign, rule_id HAVING sum(n) > 0),
			byshard AS (SELECT shard_id, sum(n) AS n FROM (
					SELECT ign, shard_id, n FROM a WHERE gs = 2 AND ` + open + `
					UNION ALL SELECT ign, shard_id, -1 FROM b WHERE ` + open + `
					UNION ALL SELECT ign, shard_id, 1 FROM b WHERE ` + kept + `) u
				WHERE ` + shown + ` GROUP BY shard_id HAVING sum(n) > 0)
			SELECT 'rule' AS k, rule_id AS name, n::bigint FROM byrule WHERE ` + shown + `
			UNION ALL SELECT 'ignored', '', n::bigint FROM byrule WHERE ign
			UNION ALL SELECT 'state', 'open', coalesce((SELECT sum(n) FROM a WHERE gs = 1 AND ` + open + ` AND ` + shown + `), 0)::bigint
				- (SELECT count(*) FROM b WHERE ` + open + ` AND ` + shown + `)
			UNION ALL SELECT 'state', state, count(*) FROM b WHERE ` + kept + ` AND ` + shown + ` GROUP BY state
			UNION ALL SELECT 'seen', '', count(*) FROM b WHERE ` + kept + ` AND seen AND ` + shown + `
			UNION ALL SELECT 'repositories', '', count(*) FROM byshard
			UNION ALL SELECT 'repo', (SELECT ` + fleetRepo + ` FROM shards sh LEFT JOIN codebases cb ON cb.id = sh.codebase_id WHERE sh.id = r.shard_id), r.n::bigint
			FROM (SELECT shard_id, n FROM byshard ORDER BY n DESC, shard_id LIMIT ` + limit + `) r`, args
}

// ApplyIgnore marks the scope's findings that fingerprints (gitleaks'
// forms, from the .gitleaksignore files of the scanned tips) name as
// ignored by .gitleaksignore, and clears the mark of those they no longer
// name; a finding an inline gitleaks:allow suppresses keeps that cause.
// It returns how many findings the files suppress.
func (s *Store) ApplyIgnore(ctx context.Context, scopeID int64, fingerprints []string) (int64, error) {
	const file = `(CASE WHEN archive = '' THEN path ELSE path || '!' || archive END) || ':' || rule_id || ':' || line`
	// IN a set, not = ANY: a repository's file may hold thousands of
	// fingerprints, and the set is hashed once rather than searched per row.
	named := `(` + file + ` IN (SELECT unnest($2::text[])) OR commit_id || ':' || ` + file + ` IN (SELECT unnest($2::text[])))`
	var n int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if fingerprints == nil {
			fingerprints = []string{}
		}
		rows, err := tx.Query(ctx, `UPDATE findings SET ignored = '' WHERE scope_id = $1 AND ignored = '.gitleaksignore' AND NOT `+named+`
			RETURNING rule_id, secret_hash, secret_path`, scopeID, fingerprints)
		if err != nil {
			return err
		}
		changed, err := collectKeys(rows)
		if err != nil {
			return err
		}
		if len(fingerprints) > 0 {
			rows, err := tx.Query(ctx, `UPDATE findings SET ignored = '.gitleaksignore' WHERE scope_id = $1 AND ignored = '' AND `+named+`
				RETURNING rule_id, secret_hash, secret_path`, scopeID, fingerprints)
			if err != nil {
				return err
			}
			set, err := collectKeys(rows)
			if err != nil {
				return err
			}
			changed = append(changed, set...)
		}
		if len(changed) > 0 {
			rules, hashes, paths := make([]string, len(changed)), make([]string, len(changed)), make([]string, len(changed))
			for i, k := range changed {
				rules[i], hashes[i], paths[i] = k.RuleID, k.SecretHash, k.File
			}
			if _, err := tx.Exec(ctx, `UPDATE secrets x SET ignored = coalesce((SELECT CASE WHEN bool_and(o.ignored <> '') THEN min(o.ignored) ELSE '' END
					FROM `+fleetOccurrences+`), '')
				WHERE x.scope_id = $1 AND (x.rule_id, x.secret_hash, x.secret_path) IN
					(SELECT DISTINCT r, h, p FROM unnest($2::text[], $3::text[], $4::text[]) AS k(r, h, p))`,
				scopeID, rules, hashes, paths); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM findings WHERE scope_id = $1 AND ignored = '.gitleaksignore'`, scopeID).Scan(&n)
	})
	return n, err
}

func collectKeys(rows pgx.Rows) ([]SecretKey, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (SecretKey, error) {
		var k SecretKey
		err := row.Scan(&k.RuleID, &k.SecretHash, &k.File)
		return k, err
	})
}

// FleetRepository is a repository (or scan target) holding secrets a
// filter selects, with what a report of it says: where it is and the tips
// its latest presence computation saw.
type FleetRepository struct {
	ShardID int64
	// Repository is host/owner/name (a scan target's location), as
	// FleetSecret names it.
	Repository string
	// Location is the clone URL or the local path; Codebase that it is a
	// collected repository (whose DefaultBranch the forge said).
	Location      string
	Local         bool
	Codebase      bool
	DefaultBranch string
	// Secrets and Occurrences count what the filter selects (Occurrences
	// without those the repository suppresses, unless it asks for them).
	Secrets, Occurrences int64
	// Tips are the refs and their commits at the latest complete scan.
	Tips map[string]string
}

// FleetRepositories lists the repositories holding secrets f selects, by
// name.
func (s *Store) FleetRepositories(ctx context.Context, f FleetFilter) ([]FleetRepository, error) {
	where, args := f.where(nil)
	occ := `(SELECT count(*) FROM ` + fleetOccurrences + ` AND o.ignored = '')`
	if f.Ignored || f.IgnoredOnly {
		occ = `(SELECT count(*) FROM ` + fleetOccurrences + `)`
	}
	var out []FleetRepository
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT sc.shard_id, sc.id, `+fleetRepo+`, sh.location, sh.local, cb.id IS NOT NULL,
				coalesce(cb.default_branch, ''), count(*), sum(`+occ+`)::bigint
			FROM `+fleetFrom+` WHERE `+where+`
			GROUP BY sc.shard_id, sc.id, 3, sh.location, sh.local, cb.id, cb.default_branch ORDER BY 3, 1`, args...)
		if err != nil {
			return err
		}
		var scopes []int64
		var r FleetRepository
		var scope int64
		if _, err := pgx.ForEachRow(rows, []any{&r.ShardID, &scope, &r.Repository, &r.Location, &r.Local, &r.Codebase,
			&r.DefaultBranch, &r.Secrets, &r.Occurrences}, func() error {
			r.Tips = map[string]string{}
			out = append(out, r)
			scopes = append(scopes, scope)
			return nil
		}); err != nil {
			return err
		}
		at := make(map[int64]int, len(scopes))
		for i, sc := range scopes {
			at[sc] = i
		}
		rows, err = tx.Query(ctx, `SELECT scope_id, ref, commit_id FROM finding_presence_refs WHERE scope_id = ANY($1::bigint[])`, scopes)
		if err != nil {
			return err
		}
		var ref, commit string
		_, err = pgx.ForEachRow(rows, []any{&scope, &ref, &commit}, func() error {
			out[at[scope]].Tips[ref] = commit
			return nil
		})
		return err
	})
	return out, err
}

// EachOccurrence calls fn with every occurrence of the secrets f selects,
// suppressed ones included (fn decides), and its secret: a page of
// pageSize secrets at a time, and each scope's occurrences of them a page
// at a time, so that memory stays constant however many there are.
func (s *Store) EachOccurrence(ctx context.Context, f FleetFilter, pageSize int, fn func(FleetSecret, Occurrence) error) error {
	for after := int64(0); ; {
		page, err := s.FleetSecrets(ctx, f, Page{After: after, Limit: pageSize})
		if err != nil {
			return err
		}
		var scopes []int64
		byScope := map[int64][]SecretKey{}
		secret := map[int64]map[SecretKey]FleetSecret{}
		for _, fs := range page {
			if _, ok := byScope[fs.ScopeID]; !ok {
				scopes = append(scopes, fs.ScopeID)
				secret[fs.ScopeID] = map[SecretKey]FleetSecret{}
			}
			byScope[fs.ScopeID] = append(byScope[fs.ScopeID], fs.SecretKey)
			secret[fs.ScopeID][fs.SecretKey] = fs
		}
		for _, scope := range scopes {
			for oafter := int64(0); ; {
				op, err := s.Occurrences(ctx, scope, byScope[scope], Page{After: oafter, Limit: pageSize})
				if err != nil {
					return err
				}
				for _, o := range op.Occurrences {
					if err := fn(secret[scope][o.SecretKey], o); err != nil {
						return err
					}
				}
				if len(op.Occurrences) < pageSize {
					break
				}
				oafter = op.Occurrences[len(op.Occurrences)-1].Cursor
			}
		}
		if len(page) < pageSize {
			return nil
		}
		after = page[len(page)-1].Cursor
	}
}

// Report is o as the reports take it, with s's triage, validity and
// repository.
func (s FleetSecret) Report(o Occurrence) report.Occurrence {
	r := report.Occurrence{Repository: s.Repository, RuleID: o.RuleID, Path: o.Path, Archive: o.Archive, Line: o.Line, Commit: o.Commit,
		SecretHash: o.SecretHash, Preview: o.Preview, Decoded: o.Decoded, Status: string(o.Status), State: s.State, SeenAgain: s.SeenAgain,
		Ignored: suppress.Cause(o.Ignored)}
	if v := s.Validity; v != nil {
		r.Validity = v.State
		var facts struct{ Note string }
		if json.Unmarshal(v.Facts, &facts) == nil && facts.Note == "test mode" {
			r.TestKey = true
		}
	}
	return r
}
