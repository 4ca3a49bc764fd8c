package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/infra/store"
)

// BenchmarkRetention seeds six months of a fleet's activity and runs the
// daily cleanup over it with the default retention, printing every
// table's rows and size before and after:
//
//	go test ./internal/infra/store/ -run '^$' -bench Retention -benchtime 1x
//
// GITFLEET_BENCH_CODEBASES sets the fleet (default 1,000). Each codebase
// was collected four times a day for 180 days (a tenth renamed 100 days
// ago), scanned once a day (a receipt each) under three rule sets, the
// rules changing 120 and 30 days ago (300 seen blobs, 10 findings with
// their paths and presence, 3 watermarks per scope); one in twenty went
// stale 60 days ago; and as many scan requests were made over the six
// months (200 seen blobs each).
func BenchmarkRetention(b *testing.B) {
	n := 1000
	if v := os.Getenv("GITFLEET_BENCH_CODEBASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 20 {
			b.Fatalf("GITFLEET_BENCH_CODEBASES=%q", v)
		}
	}
	day := 24 * time.Hour
	// The defaults (config.DefaultRetention).
	retention := store.Retention{Collections: 90 * day, Receipts: 30 * day, OldScopes: 7 * day, Scans: 90 * day}
	for i := range b.N {
		b.StopTimer()
		st := cleanupDB(b, fmt.Sprintf("bench_retention_%d_%d", time.Now().UnixNano(), i))
		start := time.Now()
		seedMonths(b, st, n)
		before := tableSizes(b, st)
		seenBefore := sqlCount(b, st, `SELECT count(*) FROM seen_blob_ids`)
		fmt.Printf("\nseeded six months of %d codebases in %s\n", n, time.Since(start).Round(time.Second))
		b.StartTimer()

		start = time.Now()
		plan := store.CleanupPlan{StaleBefore: time.Now().Add(-30 * day), Now: time.Now(), Retention: retention}
		var total store.CleanupCounts
		var c store.CleanupCursor
		steps, most, slowest := 0, int64(0), time.Duration(0)
		for {
			t := time.Now()
			r, next, done, err := st.CleanupStep(context.Background(), plan, c)
			if err != nil {
				b.Fatal(err)
			}
			steps++
			most, slowest = max(most, r.Total()), max(slowest, time.Since(t))
			total.Add(r)
			if done {
				break
			}
			c = next
		}
		took := time.Since(start)

		b.StopTimer()
		if _, err := st.Pool().Exec(context.Background(), `VACUUM ANALYZE`); err != nil {
			b.Fatal(err)
		}
		after := tableSizes(b, st)
		var out strings.Builder
		fmt.Fprintf(&out, "\nretention over six months of %d codebases: %s in %d steps (largest %d rows, slowest %s)\n",
			n, took.Round(time.Millisecond), steps, most, slowest.Round(time.Millisecond))
		fmt.Fprintf(&out, "deleted: %d codebases, %d shards, %d scopes, %d collections, %d receipts, %d data rows\n",
			total.Codebases, total.Shards, total.Scopes, total.Collections, total.Receipts, total.Rows)
		fmt.Fprintf(&out, "%-22s %12s %12s %10s %10s\n", "table", "rows before", "rows after", "MB before", "MB after")
		for _, t := range before {
			a := after[0]
			for _, x := range after {
				if x.name == t.name {
					a = x
				}
			}
			fmt.Fprintf(&out, "%-22s %12d %12d %10.1f %10.1f\n", t.name, t.rows, a.rows, float64(t.bytes)/1e6, float64(a.bytes)/1e6)
		}
		fmt.Fprintf(&out, "seen blobs (seen_blob_ids, %d a chunk on average): %d before, %d after\n",
			seenBefore/max(before[6].rows, 1), seenBefore, sqlCount(b, st, `SELECT count(*) FROM seen_blob_ids`))
		fmt.Fprintln(&out, "(sizes after a plain VACUUM: the space deleted rows held is reused by new rows, not returned)")
		fmt.Print(out.String())
		b.ReportMetric(float64(steps), "steps")
		b.ReportMetric(float64(total.Total()), "rows-deleted")
		b.StartTimer()
	}
}

type tableSize struct {
	name        string
	rows, bytes int64
}

func tableSizes(b *testing.B, st *store.Store) []tableSize {
	b.Helper()
	var out []tableSize
	for _, t := range []string{"codebases", "collections", "shards", "scan_scopes", "shard_receipts", "shard_watermarks",
		"seen_blob_chunks", "findings", "finding_paths", "finding_presence", "finding_presence_refs"} {
		s := tableSize{name: t}
		if err := st.Pool().QueryRow(context.Background(), `SELECT count(*), pg_total_relation_size($1::regclass) FROM `+t, t).
			Scan(&s.rows, &s.bytes); err != nil {
			b.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// seedMonths writes six months of activity of n codebases (see
// BenchmarkRetention), as the application would have left it.
func seedMonths(b *testing.B, st *store.Store, n int) {
	b.Helper()
	for _, q := range []string{
		`INSERT INTO codebases (host, external_repo_id, owner, name, stale_since, last_viewed_at)
			SELECT 'github.com', i::text, 'org' || (i % 50), 'repo' || i,
				CASE WHEN i % 20 = 0 THEN now() - interval '60 days' END, now()
			FROM generate_series(1, $1::int) AS i`,
		`INSERT INTO collections (key, codebase_id, host, owner, name, status, commit_sha, workflow_id, run_id, started_at, finished_at)
			SELECT c.id || ':' || d || ':' || k, c.id, c.host, c.owner,
				CASE WHEN c.id % 10 = 0 AND d > 100 THEN 'old-' || c.name ELSE c.name END,
				'succeeded', md5(c.id || ':' || d || ':' || k), 'collect:github.com/' || c.owner || '/' || c.name,
				md5(d || ':' || k), now() - d * interval '1 day' - k * interval '6 hours',
				now() - d * interval '1 day' - k * interval '6 hours' + interval '1 minute'
			FROM codebases c, generate_series(0, 179) AS d, generate_series(0, 3) AS k`,
		`INSERT INTO shards (key, codebase_id, location, status, updated_at)
			SELECT 'codebase:' || id, id, 'https://github.com/' || owner || '/' || name, 'Done', now() - interval '1 day'
			FROM codebases`,
		`INSERT INTO shards (key, location, status, updated_at)
			SELECT 'target:' || md5(i::text), 'https://github.com/scan/' || i, 'Done', now() - (i % 180) * interval '1 day'
			FROM generate_series(1, $1::int) AS i`,
		`INSERT INTO scan_scopes (shard_id, policy_hash, created_at)
			SELECT s.id, p.h, now() - p.age * interval '1 day'
			FROM shards s, (VALUES ('p1', 180), ('p2', 120), ('p3', 30)) AS p(h, age)
			WHERE s.key LIKE 'codebase:%' OR p.h = 'p3'`,
		// Seen blobs packed as store.WriteData packs them (migration 00058):
		// 20-byte ids, up to 96 a chunk of one of 64 buckets.
		`INSERT INTO seen_blob_chunks (scope_id, bucket, chunk, ids)
			SELECT scope_id, bucket, (n - 1) / 96, string_agg(id, ''::bytea ORDER BY n)
			FROM (SELECT scope_id, id, get_byte(id, 0) >> 2 AS bucket,
					row_number() OVER (PARTITION BY scope_id, get_byte(id, 0) >> 2 ORDER BY id) AS n
				FROM (SELECT sc.id AS scope_id, decode(md5(sc.id || ':' || b) || left(md5(b || ':' || sc.id), 8), 'hex') AS id
					FROM scan_scopes sc JOIN shards s ON s.id = sc.shard_id,
						generate_series(1, 300) AS b WHERE s.key LIKE 'codebase:%' OR b <= 200) AS ids) AS t
			GROUP BY scope_id, bucket, (n - 1) / 96`,
		`INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview, secret_path)
			SELECT sc.id, 'generic-api-key', int8send(sc.id * 1000 + b), 0, 40, 12, 'config/app' || b || '.env',
				md5(b::text), md5(sc.id || ':' || b), 'api_key=AKIA****', ''
			FROM scan_scopes sc, generate_series(1, 10) AS b`,
		`INSERT INTO finding_paths (scope_id, blob, path)
			SELECT scope_id, blob, path FROM findings`,
		`INSERT INTO finding_presence_refs (scope_id, ref, commit_id)
			SELECT id, 'refs/heads/main', md5(id::text) FROM scan_scopes`,
		`INSERT INTO finding_presence (scope_id, ref, blob)
			SELECT scope_id, 'refs/heads/main', blob FROM findings`,
		`INSERT INTO shard_watermarks (scope_id, ref, commit_id)
			SELECT sc.id, r, md5(sc.id || r) FROM scan_scopes sc,
				unnest(ARRAY['refs/heads/main', 'refs/heads/dev', 'refs/tags/v1']) AS r`,
		// A scan a day, under the rules of the day; a scan request's one.
		`INSERT INTO shard_receipts (shard_id, scope_id, fence, complete, commits, blobs_scanned, created_at)
			SELECT s.id, (SELECT sc.id FROM scan_scopes sc WHERE sc.shard_id = s.id
					AND sc.created_at <= now() - d * interval '1 day' ORDER BY sc.created_at DESC LIMIT 1),
				180 - d, true, 3, 20, now() - d * interval '1 day'
			FROM shards s, generate_series(0, 179) AS d WHERE s.key LIKE 'codebase:%'`,
		`INSERT INTO shard_receipts (shard_id, scope_id, fence, complete, commits, blobs_scanned, created_at)
			SELECT s.id, sc.id, 1, true, 40, 200, s.updated_at
			FROM shards s JOIN scan_scopes sc ON sc.shard_id = s.id WHERE s.key LIKE 'target:%'`,
		`UPDATE shards s SET (checkpoint_receipt_id, fence) = (SELECT r.id, r.fence FROM shard_receipts r
			WHERE r.shard_id = s.id ORDER BY r.fence DESC LIMIT 1)`,
		`ANALYZE`,
	} {
		args := []any{}
		if strings.Contains(q, "$1") {
			args = append(args, n)
		}
		if _, err := st.Pool().Exec(context.Background(), q, args...); err != nil {
			b.Fatalf("%v\n%s", err, q)
		}
	}
}
