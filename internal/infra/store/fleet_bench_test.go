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

// BenchmarkFleetFindings seeds a fleet of 100,000 repositories holding
// 1,000,000 occurrences of 400,000 secrets (a tenth of the repositories
// scanned again under new rules, 2% of the secrets resolved, some
// suppressed, decoded, present at the tips) and prints how long the fleet
// view's pages and summaries take, with the plans of the two main queries:
//
//	go test ./internal/infra/store/ -run '^$' -bench FleetFindings -benchtime 1x
//
// GITFLEET_BENCH_REPOS sets the number of repositories (default 100,000;
// 10 occurrences each).
func BenchmarkFleetFindings(b *testing.B) {
	repos := benchRepos(b, 100_000)
	ctx := context.Background()
	for i := range b.N {
		b.StopTimer()
		st := cleanupDB(b, fmt.Sprintf("bench_fleet_%d_%d", time.Now().UnixNano(), i))
		start := time.Now()
		seedFleet(b, st, repos)
		fmt.Printf("\nseeded %d repositories, %d occurrences, %d secrets in %s\n", repos,
			sqlCount(b, st, `SELECT count(*) FROM findings`), sqlCount(b, st, `SELECT count(*) FROM secrets`), time.Since(start).Round(time.Second))
		b.StartTimer()

		yes := true
		cases := []struct {
			name    string
			f       store.FleetFilter
			summary bool
		}{
			{"newest page", store.FleetFilter{}, false},
			{"page, --repo 'github.com/org7/*'", store.FleetFilter{Repo: "github.com/org7/*"}, false},
			{"page, --repo one repository", store.FleetFilter{Repo: "github.com/org242/repo4242"}, false},
			{"page, --rule aws-access-token", store.FleetFilter{Rules: []string{"aws-access-token"}}, false},
			{"page, --state revoked", store.FleetFilter{States: []string{store.StateRevoked}}, false},
			{"page, --state resolved --seen-again", store.FleetFilter{States: []string{"resolved"}, SeenAgain: true}, false},
			{"page, --status present", store.FleetFilter{Presence: store.Present}, false},
			{"page, --decoded", store.FleetFilter{Decoded: &yes}, false},
			{"page, --since 1 hour ago", store.FleetFilter{Since: time.Now().Add(-time.Hour)}, false},
			{"page, --ignored-only", store.FleetFilter{IgnoredOnly: true}, false},
			{"summary of the fleet", store.FleetFilter{}, true},
			{"summary, --repo 'github.com/org7/*'", store.FleetFilter{Repo: "github.com/org7/*"}, true},
			{"summary, --state open --rule github-pat", store.FleetFilter{States: []string{"open"}, Rules: []string{"github-pat"}}, true},
		}
		var out strings.Builder
		fmt.Fprintf(&out, "\n%-45s %10s %8s\n", "query", "time", "rows")
		slowest := time.Duration(0)
		for _, c := range cases {
			t := time.Now()
			rows := 0
			if c.summary {
				s, err := st.Summary(ctx, c.f, 10)
				if err != nil {
					b.Fatal(err)
				}
				rows = int(s.Secrets)
			} else {
				xs, err := st.FleetSecrets(ctx, c.f, store.Page{Limit: 50})
				if err != nil {
					b.Fatal(err)
				}
				rows = len(xs)
			}
			took := time.Since(t)
			slowest = max(slowest, took)
			fmt.Fprintf(&out, "%-45s %10s %8d\n", c.name, took.Round(100*time.Microsecond), rows)
			if took > 200*time.Millisecond && !c.summary { // what made it slow
				plan, err := st.ExplainFleet(ctx, c.f, store.Page{Limit: 50})
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(&out, "%s\n", plan)
			}
		}
		b.StopTimer()
		fmt.Print(out.String())
		plan, err := st.ExplainFleet(ctx, store.FleetFilter{}, store.Page{Limit: 50})
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("\nplan of the newest page:\n%s\n", plan)
		if plan, err = st.ExplainSummary(ctx, store.FleetFilter{}, 10); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("\nplan of the fleet's summary:\n%s\n", plan)
		b.ReportMetric(float64(slowest.Milliseconds()), "slowest-ms")
		b.StartTimer()
	}
}

// seedFleet writes repos codebases with a shard and a scope each (a tenth
// with an older scope too), 10 occurrences each of 4 secrets, presence,
// and triage states, as the application would have written them.
func seedFleet(b *testing.B, st *store.Store, repos int) {
	b.Helper()
	sqlExec(b, st, `INSERT INTO codebases (host, external_repo_id, owner, name)
		SELECT 'github.com', i::text, 'org' || (i % 1000), 'repo' || i FROM generate_series(1, $1::int) i`, repos)
	sqlExec(b, st, `INSERT INTO shards (key, codebase_id, location, status)
		SELECT 'codebase:' || id, id, 'https://github.com/' || owner || '/' || name, 'Done' FROM codebases`)
	// An old scope (rules changed since) for a tenth of them, then the current one.
	sqlExec(b, st, `INSERT INTO scan_scopes (shard_id, policy_hash, presence_upto) SELECT id, 'old', 0 FROM shards WHERE id % 10 = 0`)
	sqlExec(b, st, `INSERT INTO scan_scopes (shard_id, policy_hash) SELECT id, 'new' FROM shards`)
	rules := `ARRAY['github-pat','aws-access-token','generic-api-key','slack-bot-token','gitfleet-database-url-password','private-key','gcp-api-key','stripe-access-token']`
	// Ten occurrences per repository, in batches: occurrence j of the
	// current scope holds secret j % 4, in blob j; the old scope's hold
	// the same secrets.
	for lo := 0; lo < repos; lo += 10_000 {
		sqlExec(b, st, `INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview,
				decoded, secret_path, ignored)
			SELECT sc.id, (`+rules+`)[1 + (sc.shard_id + j % 4) % 8], decode(lpad(to_hex(sc.shard_id), 16, '0') || lpad(to_hex(j), 8, '0'), 'hex'),
				j * 10, j * 10 + 40, j + 1, 'config/file' || j || '.env', md5(sc.shard_id::text || 'c' || j),
				md5(sc.shard_id::text || 's' || (j % 4)) || md5(sc.shard_id::text || 't' || (j % 4)), 'ghp_…(40)',
				CASE WHEN sc.shard_id % 50 = 0 AND j % 4 = 1 THEN 'base64' ELSE '' END, '',
				CASE WHEN sc.shard_id % 100 = 0 AND j % 4 = 2 THEN '.gitleaksignore' ELSE '' END
			FROM scan_scopes sc CROSS JOIN generate_series(0, 9) j
			WHERE sc.shard_id > $1 AND sc.shard_id <= $2 AND (sc.policy_hash = 'new' OR j < 4)
			ORDER BY sc.id, j`, lo, lo+10_000)
	}
	// Presence: the first two blobs of each current scope at its tip.
	sqlExec(b, st, `INSERT INTO finding_presence_refs (scope_id, ref, commit_id) SELECT id, 'refs/heads/main', 'tip' FROM scan_scopes WHERE policy_hash = 'new'`)
	sqlExec(b, st, `INSERT INTO finding_presence (scope_id, ref, blob)
		SELECT f.scope_id, 'refs/heads/main', f.blob FROM findings f JOIN scan_scopes sc ON sc.id = f.scope_id
		WHERE sc.policy_hash = 'new' AND f.start_offset < 20`)
	// As each presence computation leaves secrets.present.
	sqlExec(b, st, `UPDATE secrets x SET present = true FROM (SELECT DISTINCT o.scope_id, o.rule_id, o.secret_hash, o.secret_path
		FROM findings o JOIN finding_presence p ON p.scope_id = o.scope_id AND p.blob = o.blob) y
		WHERE (x.scope_id, x.rule_id, x.secret_hash, x.secret_path) = (y.scope_id, y.rule_id, y.secret_hash, y.secret_path)`)
	sqlExec(b, st, `UPDATE scan_scopes s SET presence_upto = m.upto
		FROM (SELECT scope_id, max(id) AS upto FROM findings GROUP BY scope_id) m WHERE m.scope_id = s.id AND s.policy_hash = 'new'`)
	sqlExec(b, st, `ANALYZE`)
	// 2% of the secrets resolved, knowing their first blob only: the other
	// occurrences are "seen again".
	sqlExec(b, st, `INSERT INTO secret_states (subject, rule_id, secret_hash, secret_path, state, actor, changed_at, known_blobs)
		SELECT sh.key, x.rule_id, x.secret_hash, x.secret_path, (ARRAY['revoked','false_positive','used_in_tests','wont_fix'])[1 + x.first_id % 4],
			'bench', now(), ARRAY[(SELECT blob FROM findings WHERE id = x.first_id)]
		FROM secrets x JOIN scan_scopes sc ON sc.id = x.scope_id JOIN shards sh ON sh.id = sc.shard_id
		WHERE sc.policy_hash = 'new' AND abs(hashtext(x.secret_hash)) % 50 = 0`)
	sqlExec(b, st, `VACUUM ANALYZE`)
}

// benchRepos is the fleet size a benchmark seeds: GITFLEET_BENCH_REPOS, or
// def.
func benchRepos(b *testing.B, def int) int {
	v := os.Getenv("GITFLEET_BENCH_REPOS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 {
		b.Fatalf("GITFLEET_BENCH_REPOS=%q: want a number of at least 100", v)
	}
	return n
}
