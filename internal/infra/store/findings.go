package store

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
)

// A secret is one SecretKey within a scope; each of its findings
// (a blob version holding it, at an offset) is an occurrence. "First" is
// the order findings were recorded in (their ids): a scan walks each ref's
// new commits oldest first by committer date, and every scan continues
// where the last one stopped, so the first occurrence is where the scans
// met the secret first — the oldest commit of the earliest scan that saw it.

// SecretKey names a secret: a rule and the keyed hash of what it matched,
// or, for a path-only rule (it matches files and has no hash), the rule
// and the file's path.
type SecretKey struct {
	RuleID     string `json:"rule"`
	SecretHash string `json:"secretHash"`
	// File is the path for a path-only rule (in an archive, the archive's
	// and the file's in it joined with "!"), else empty.
	File string `json:"-"`
}

// PresenceStatus is where a secret or an occurrence stands at the tips of
// the scope's latest Complete scan.
type PresenceStatus string

const (
	// Present: a blob holding it is in the tree of a scanned ref's tip.
	Present PresenceStatus = "present"
	// Removed: no scanned ref's tip holds it any more (history still does).
	Removed PresenceStatus = "removed"
	// Unknown: found after the last Complete scan (or before presence was
	// recorded at all); the next Complete scan decides.
	Unknown PresenceStatus = "unknown"
)

// Location is where an occurrence was met: the path and line in the
// commit that introduced its blob, and when the blob is an archive, the
// file in it that the line is in (see Finding.Archive).
type Location struct {
	Path    string `json:"path"`
	Archive string `json:"archive,omitempty"`
	Line    int    `json:"line"`
	Commit  string `json:"commit"`
}

// Secret is a secret with its first and latest occurrence.
type Secret struct {
	SecretKey
	// Location is the first occurrence's.
	Location
	Preview string `json:"preview"`
	// Decoded is how the first occurrence was reached (see Finding).
	Decoded     string         `json:"decoded,omitempty"`
	Occurrences int64          `json:"count"`
	Status      PresenceStatus `json:"status"`
	Last        Location       `json:"last"`
	// Cursor is the first occurrence's id: the page order and keyset.
	Cursor int64 `json:"-"`
}

// Occurrence is one finding of a secret.
type Occurrence struct {
	SecretKey `json:"-"`
	Location
	BlobHex string         `json:"blob"`
	Start   int            `json:"start"`
	End     int            `json:"end"`
	Preview string         `json:"preview"`
	Decoded string         `json:"decoded,omitempty"`
	Status  PresenceStatus `json:"status"`
	// AlsoAt are the other paths the same blob was met at (a copy, a
	// rename): the same content, the secret at the same line (none for a
	// path-only rule's finding, which is about its path).
	AlsoAt []string `json:"alsoAt,omitempty"`
	// Ignored is why the repository's suppressions apply (see
	// Finding.Ignored), "" when they do not.
	Ignored string `json:"ignored,omitempty"`
	// Cursor is the finding's id: the page order and keyset.
	Cursor int64 `json:"-"`
}

// Page asks for the items after the cursor After (0: from the start), at
// most Limit of them (0: all).
type Page struct {
	After int64
	Limit int
}

func (p Page) limit() any {
	if p.Limit <= 0 {
		return nil // LIMIT NULL: no limit
	}
	return p.Limit
}

// SecretPage is a page of secrets and the totals of the scope.
type SecretPage struct {
	Secrets []Secret
	// Total secrets and occurrences of the scope, but for the secrets the
	// repository's suppressions apply to at every occurrence (.gitleaksignore,
	// gitleaks:allow), which are left out and counted in Ignored.
	Total, TotalOccurrences, Ignored int64
}

// OccurrencePage is a page of occurrences and how many match in all.
type OccurrencePage struct {
	Occurrences []Occurrence
	Total       int64
}

// LatestScope is the scope of a shard under its newest rule set, or 0.
func (s *Store) LatestScope(ctx context.Context, shardID int64) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM scan_scopes WHERE shard_id = $1 ORDER BY id DESC LIMIT 1`, shardID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// presenceCTE names the blobs present at the tips (pb) and the newest
// finding presence was decided for (sc).
const presenceCTE = `sc AS (SELECT presence_upto AS upto FROM scan_scopes WHERE id = $1),
	pb AS (SELECT DISTINCT blob FROM finding_presence WHERE scope_id = $1)`

// Secrets lists a scope's secrets in the order they were first met, a page
// at a time, with the scope's totals (read in the same snapshot).
func (s *Store) Secrets(ctx context.Context, scopeID int64, page Page) (SecretPage, error) {
	var out SecretPage
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT ign), coalesce(sum(n) FILTER (WHERE NOT ign), 0)::bigint,
				count(*) FILTER (WHERE ign)
			FROM (SELECT count(*) AS n, bool_and(ignored <> '') AS ign FROM findings WHERE scope_id = $1
				GROUP BY rule_id, secret_hash, secret_path) AS g`,
			scopeID).Scan(&out.Total, &out.TotalOccurrences, &out.Ignored); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `WITH `+presenceCTE+`,
			g AS (SELECT f.rule_id, f.secret_hash, f.secret_path, min(f.id) AS first_id, max(f.id) AS last_id, count(*) AS n,
					bool_or(pb.blob IS NOT NULL) AS present
				FROM findings f LEFT JOIN pb ON pb.blob = f.blob
				WHERE f.scope_id = $1
				GROUP BY f.rule_id, f.secret_hash, f.secret_path
				HAVING min(f.id) > $2 AND NOT bool_and(f.ignored <> '')
				ORDER BY first_id LIMIT $3)
			SELECT g.first_id, g.rule_id, g.secret_hash, g.secret_path, g.n,
				CASE WHEN g.present THEN 'present' WHEN g.last_id <= (SELECT upto FROM sc) THEN 'removed' ELSE 'unknown' END,
				f.path, f.archive, f.line, f.commit_id, f.preview, f.decoded, l.path, l.archive, l.line, l.commit_id
			FROM g JOIN findings f ON f.id = g.first_id JOIN findings l ON l.id = g.last_id
			ORDER BY g.first_id`, scopeID, page.After, page.limit())
		if err != nil {
			return err
		}
		out.Secrets, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Secret, error) {
			var x Secret
			err := row.Scan(&x.Cursor, &x.RuleID, &x.SecretHash, &x.File, &x.Occurrences, &x.Status,
				&x.Path, &x.Archive, &x.Line, &x.Commit, &x.Preview, &x.Decoded, &x.Last.Path, &x.Last.Archive, &x.Last.Line, &x.Last.Commit)
			return x, err
		})
		return err
	})
	return out, err
}

// Occurrences lists a scope's findings in the order they were recorded, a
// page at a time, only those of keys unless keys is nil, with how many
// match in all.
func (s *Store) Occurrences(ctx context.Context, scopeID int64, keys []SecretKey, page Page) (OccurrencePage, error) {
	var out OccurrencePage
	rules, hashes, files := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		rules[i], hashes[i], files[i] = k.RuleID, k.SecretHash, k.File
	}
	// $1 the scope, $2 whether keys filter, $3 to $5 the keys.
	const filter = `f.scope_id = $1 AND (NOT $2::bool OR (f.rule_id, f.secret_hash, f.secret_path) IN
		(SELECT r, h, p FROM unnest($3::text[], $4::text[], $5::text[]) AS k(r, h, p)))`
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM findings f WHERE `+filter,
			scopeID, keys != nil, rules, hashes, files).Scan(&out.Total); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `WITH `+presenceCTE+`
			SELECT f.id, f.rule_id, f.secret_hash, f.secret_path, f.path, f.archive, f.line, f.commit_id, f.blob, f.start_offset, f.end_offset, f.preview, f.decoded,
				CASE WHEN pb.blob IS NOT NULL THEN 'present' WHEN f.id <= (SELECT upto FROM sc) THEN 'removed' ELSE 'unknown' END,
				ARRAY(SELECT p.path FROM finding_paths p WHERE p.scope_id = f.scope_id AND p.blob = f.blob AND p.path <> f.path
					AND f.secret_path = '' ORDER BY p.path), f.ignored
			FROM findings f LEFT JOIN pb ON pb.blob = f.blob
			WHERE `+filter+` AND f.id > $6
			ORDER BY f.id LIMIT $7`, scopeID, keys != nil, rules, hashes, files, page.After, page.limit())
		if err != nil {
			return err
		}
		out.Occurrences, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Occurrence, error) {
			var o Occurrence
			var blob []byte
			err := row.Scan(&o.Cursor, &o.RuleID, &o.SecretHash, &o.File, &o.Path, &o.Archive, &o.Line, &o.Commit, &blob, &o.Start, &o.End,
				&o.Preview, &o.Decoded, &o.Status, &o.AlsoAt, &o.Ignored)
			o.BlobHex = fmt.Sprintf("%x", blob)
			return o, err
		})
		return err
	})
	return out, err
}

// readTx runs fn in a read-only transaction that sees one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// PresenceBasis is what computing presence starts from.
type PresenceBasis struct {
	// Tips are the ref tips the current presence rows were computed at.
	Tips map[string]string
	// Blobs are the distinct blobs of the scope's findings.
	Blobs [][]byte
	// Paths are, by blob (as a string), every path at which each was
	// introduced; complete when PathsComplete (see migration 00009).
	Paths         map[string][]string
	PathsComplete bool
	// UpTo is the newest finding among them (0: none).
	UpTo int64
	// Written is the UpTo of the presence rows written last (-1: none).
	Written int64
}

// Unchanged reports whether presence at tips would be what was written
// last: the same tips at the same commits, and no finding since. A
// Finalize then need not write it again (Presence nil): with many refs,
// that write is most of a run that found nothing new.
func (b PresenceBasis) Unchanged(tips map[string]string) bool {
	if b.Written != b.UpTo || len(tips) != len(b.Tips) {
		return false
	}
	for ref, c := range tips {
		if b.Tips[ref] != c {
			return false
		}
	}
	return true
}

// PresenceBasis returns the scope's recorded presence tips and the blobs
// of its findings, with their paths.
func (s *Store) PresenceBasis(ctx context.Context, scopeID int64) (PresenceBasis, error) {
	b := PresenceBasis{Tips: map[string]string{}, Paths: map[string][]string{}}
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT paths_complete, coalesce(presence_upto, -1) FROM scan_scopes WHERE id = $1`,
			scopeID).Scan(&b.PathsComplete, &b.Written); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT ref, commit_id FROM finding_presence_refs WHERE scope_id = $1`, scopeID)
		if err != nil {
			return err
		}
		var ref, commit string
		if _, err := pgx.ForEachRow(rows, []any{&ref, &commit}, func() error {
			b.Tips[ref] = commit
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT blob, max(id) FROM findings WHERE scope_id = $1 GROUP BY blob`, scopeID)
		if err != nil {
			return err
		}
		var blob []byte
		var id int64
		_, err = pgx.ForEachRow(rows, []any{&blob, &id}, func() error {
			b.Blobs = append(b.Blobs, append([]byte(nil), blob...))
			b.UpTo = max(b.UpTo, id)
			return nil
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT blob, path FROM finding_paths WHERE scope_id = $1`, scopeID)
		if err != nil {
			return err
		}
		var path string
		_, err = pgx.ForEachRow(rows, []any{&blob, &path}, func() error {
			b.Paths[string(blob)] = append(b.Paths[string(blob)], path)
			return nil
		})
		return err
	})
	return b, err
}

// Presence is where a scope's findings stand at the tips of a Complete
// run, written by its Finalize.
type Presence struct {
	// UpTo is PresenceBasis.UpTo: findings up to it are decided.
	UpTo int64
	// Tips are every tip of the run (ref → commit). Presence rows of refs
	// that are no longer tips go.
	Tips map[string]string
	// Refs are the tips computed afresh: the blobs among PresenceBasis.Blobs
	// that each tip's tree holds. A tip left out must be recorded in
	// PresenceBasis.Tips at the same commit: its rows stay.
	Refs map[string][][]byte
}

func writePresence(ctx context.Context, tx pgx.Tx, scopeID int64, p Presence) error {
	tips := make([]string, 0, len(p.Tips))
	for ref := range p.Tips {
		tips = append(tips, ref)
	}
	sort.Strings(tips)
	var kept, keptCommits, fresh, freshCommits, rowRefs []string
	var rowBlobs [][]byte
	for _, ref := range tips {
		blobs, ok := p.Refs[ref]
		if !ok {
			kept, keptCommits = append(kept, ref), append(keptCommits, p.Tips[ref])
			continue
		}
		fresh, freshCommits = append(fresh, ref), append(freshCommits, p.Tips[ref])
		for _, b := range blobs {
			rowRefs, rowBlobs = append(rowRefs, ref), append(rowBlobs, b)
		}
	}
	for ref := range p.Refs {
		if _, ok := p.Tips[ref]; !ok {
			return fmt.Errorf("presence computed for %d refs that are not tips", len(p.Refs)-len(fresh))
		}
	}
	var missing int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM unnest($2::text[], $3::text[]) AS t(r, c)
		WHERE NOT EXISTS (SELECT 1 FROM finding_presence_refs p WHERE p.scope_id = $1 AND p.ref = t.r AND p.commit_id = t.c)`,
		scopeID, kept, keptCommits).Scan(&missing); err != nil {
		return err
	}
	if missing > 0 {
		return fmt.Errorf("presence: %d tips were neither computed nor recorded at their commit", missing)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM finding_presence_refs WHERE scope_id = $1 AND NOT (ref = ANY($2::text[]))`,
		scopeID, tips); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM finding_presence WHERE scope_id = $1 AND ref = ANY($2::text[])`,
		scopeID, fresh); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO finding_presence_refs (scope_id, ref, commit_id)
		SELECT $1, r, c FROM unnest($2::text[], $3::text[]) AS t(r, c)
		ON CONFLICT (scope_id, ref) DO UPDATE SET commit_id = excluded.commit_id`, scopeID, fresh, freshCommits); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO finding_presence (scope_id, ref, blob)
		SELECT $1, r, b FROM unnest($2::text[], $3::bytea[]) AS t(r, b)
		ON CONFLICT DO NOTHING`, scopeID, rowRefs, rowBlobs); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE scan_scopes SET presence_upto = $2 WHERE id = $1`, scopeID, p.UpTo); err != nil {
		return err
	}
	// The fleet view reads presence from secrets (migration 00033).
	_, err := tx.Exec(ctx, `UPDATE secrets x SET present = NOT x.present WHERE x.scope_id = $1
		AND x.present <> ((SELECT 1 FROM findings o WHERE o.scope_id = x.scope_id AND o.rule_id = x.rule_id
			AND o.secret_hash = x.secret_hash AND o.secret_path = x.secret_path
			AND EXISTS (SELECT 1 FROM finding_presence p WHERE p.scope_id = o.scope_id AND p.blob = o.blob) LIMIT 1) IS NOT NULL)`, scopeID)
	return err
}
