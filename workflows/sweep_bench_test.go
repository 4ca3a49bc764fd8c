package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/activities"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// BenchmarkSweep runs a RecollectionSweep over 100,000 synthetic codebases
// whose views and completions spread across the decay bands. Change checks
// are stubbed to report every head unchanged, so the figure is the cost of
// the decisions: paging, decay, checks recorded, continue-as-new.
func BenchmarkSweep(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	const head = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"
	scanner, err := activities.NewScanner(ctx, env.Store, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	start := time.Now()
	pool := env.Store.Pool()
	// Views 0–100 days ago, completions 0–10 days ago, one in ten with five
	// failures; each with a Done shardID scanned under the current rules.
	for _, q := range []string{
		`INSERT INTO codebases (host, external_repo_id, owner, name, last_commit_sha, last_viewed_at, last_completed_at, consecutive_failures)
		 SELECT $1, 'bench-' || i, 'bench-sweep', 'r' || i, $2, $3::timestamptz - (i % 101) * interval '1 day' - (i % 7) * interval '1 hour',
			$3::timestamptz - (i % 11) * interval '1 day' - (i % 13) * interval '1 hour', CASE WHEN i % 10 = 0 THEN 5 ELSE 0 END
		 FROM generate_series(1, $4) AS i`,
		`INSERT INTO shards (key, codebase_id, location, status)
		 SELECT 'codebase:' || id, id, 'http://bench.invalid/' || name, 'Done' FROM codebases WHERE owner = 'bench-sweep'`,
		`INSERT INTO scan_scopes (shard_id, policy_hash) SELECT s.id, $5 FROM shards s JOIN codebases c ON c.id = s.codebase_id WHERE c.owner = 'bench-sweep'`,
		`INSERT INTO shard_receipts (shard_id, scope_id, fence, complete) SELECT shard_id, id, 1, true FROM scan_scopes
		 WHERE shard_id IN (SELECT s.id FROM shards s JOIN codebases c ON c.id = s.codebase_id WHERE c.owner = 'bench-sweep')`,
		`UPDATE shards s SET checkpoint_receipt_id = r.id FROM shard_receipts r WHERE r.shard_id = s.id AND s.key LIKE 'codebase:%'
		 AND s.codebase_id IN (SELECT id FROM codebases WHERE owner = 'bench-sweep')`,
		`ANALYZE`,
	} {
		var err error
		switch {
		case strings.HasPrefix(q, "INSERT INTO codebases"):
			_, err = pool.Exec(ctx, q, fg.Host(), head, now, n)
		case strings.Contains(q, "$5"):
			_, err = pool.Exec(ctx, strings.ReplaceAll(q, "$5", "$1"), scanner.Policy())
		default:
			_, err = pool.Exec(ctx, q)
		}
		if err != nil {
			b.Fatalf("seed: %v\n%s", err, q)
		}
	}
	seeded := time.Since(start)

	var plan []string
	rows, err := pool.Query(ctx, "EXPLAIN "+store.SweepCandidatesQuery, now.Add(-91*24*time.Hour), 0, now.Add(-91*24*time.Hour), now, 1000)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan = append(plan, line)
	}
	rows.Close()

	heads.mu.Lock()
	heads.stub = head
	heads.mu.Unlock()
	defer func() { heads.mu.Lock(); heads.stub = ""; heads.mu.Unlock() }()

	b.ResetTimer()
	begin := time.Now()
	res := runSweepB(b, workflows.RecollectionSweepInput{Now: now, PageSize: 1000})
	took := time.Since(begin)
	b.StopTimer()
	if res.Started != 0 || res.Halted {
		b.Fatalf("sweep with unchanged heads: %+v", res)
	}
	fmt.Printf("\nRecollectionSweep over %d synthetic codebases (seeded in %s)\n", n, seeded.Round(time.Millisecond))
	fmt.Printf("  result          %s, %d runs (continue-as-new)\n", res, res.Runs)
	fmt.Printf("  sweep           %s\n", took.Round(time.Millisecond))
	fmt.Printf("  decisions/s     %.0f\n", float64(res.Considered)/took.Seconds())
	fmt.Printf("  candidate query plan:\n    %s\n\n", strings.Join(plan, "\n    "))
	usesIndex := strings.Contains(strings.Join(plan, "\n"), "codebases_sweep")
	if !usesIndex {
		b.Errorf("the candidate query does not use codebases_sweep")
	}
	b.ReportMetric(took.Seconds(), "s/sweep")
	b.ReportMetric(float64(res.Considered)/took.Seconds(), "decisions/s")
}

func runSweepB(b *testing.B, in workflows.RecollectionSweepInput) workflows.SweepResult {
	b.Helper()
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.RecollectionSweep, in)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var res workflows.SweepResult
	if err := run.Get(ctx, &res); err != nil {
		b.Fatal(err)
	}
	return res
}
