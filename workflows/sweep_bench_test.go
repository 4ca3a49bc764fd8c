package workflows_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// BenchmarkSweep runs a RecollectionSweep over 100,000 synthetic codebases.
//
// unchanged: views and completions spread across the decay bands, change
// checks stubbed to report every head unchanged, so the figure is the cost
// of the decisions: paging, decay, checks recorded, continue-as-new.
//
// all-changed: every candidate is due and changed (scanned under rules
// since replaced), so the sweep starts 100,000 collections (GITFLEET_BENCH_SWEEP_N)
// with the real StartCollects, a window at a time, through a client that
// counts the Collect starts instead of making them (on a task queue of the
// benchmark's own).
func BenchmarkSweep(b *testing.B) {
	b.Run("unchanged", benchmarkSweepUnchanged)
	b.Run("all-changed", benchmarkSweepAllChanged)
}

func benchmarkSweepUnchanged(b *testing.B) {
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
		`INSERT INTO codebases (host, external_repo_id, owner, name, last_commit_sha, last_refs_digest, last_viewed_at, last_completed_at, consecutive_failures)
		 SELECT $1, 'bench-' || i, 'bench-sweep', 'r' || i, $2, $2, $3::timestamptz - (i % 101) * interval '1 day' - (i % 7) * interval '1 hour',
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

// benchSweepN is how many codebases the all-changed variant seeds
// (GITFLEET_BENCH_SWEEP_N, default 100,000).
func benchSweepN() int {
	if n, err := strconv.Atoi(os.Getenv("GITFLEET_BENCH_SWEEP_N")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// benchSweepWindow is the all-changed variant's StartWindow
// (GITFLEET_BENCH_SWEEP_WINDOW, default the sweep's own, 8).
func benchSweepWindow() int {
	n, _ := strconv.Atoi(os.Getenv("GITFLEET_BENCH_SWEEP_WINDOW"))
	return n
}

// fixedHead reports one refs digest for every remote.
type fixedHead string

func (h fixedHead) RefsDigest(context.Context, string) (string, error) { return string(h), nil }

// startCounter stands in for the Temporal client of StartCollects: it
// counts the Collect starts of each repository, and those not made as
// StartCollect makes them (the repository's workflow id, use-existing).
type startCounter struct {
	client.Client
	mu     sync.Mutex
	starts map[repoid.ID]int
	bad    int
}

func (c *startCounter) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	in := args[0].(workflows.CollectInput)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts[in.Repo]++
	if o.ID != workflows.CollectWorkflowID(in.Repo) || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		c.bad++
	}
	return nil, nil
}

func benchmarkSweepAllChanged(b *testing.B) {
	n := benchSweepN()
	ctx := context.Background()
	const head = "c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ff"
	scanner, err := activities.NewScanner(ctx, env.Store, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	// A clock of its own: the other sweeps never see these codebases.
	now := sweepClock()
	owner := fmt.Sprintf("bench-sweep-all-%d", now.Unix())
	start := time.Now()
	pool := env.Store.Pool()
	// Views 0–89 days ago, completed 8 days ago (due in every band), the
	// same head as the remote but scanned under the rules before a change.
	for _, q := range []string{
		`INSERT INTO codebases (host, external_repo_id, owner, name, last_commit_sha, last_refs_digest, last_viewed_at, last_completed_at)
		 SELECT $1, $2 || '-' || i, $2, 'r' || i, $3, $3, $4::timestamptz - (i % 90) * interval '1 day' - (i % 7) * interval '1 hour',
			$4::timestamptz - interval '8 days'
		 FROM generate_series(1, $5) AS i`,
		`INSERT INTO shards (key, codebase_id, location, status)
		 SELECT 'codebase:' || id, id, 'http://bench.invalid/' || name, 'Done' FROM codebases WHERE owner = $1`,
		`INSERT INTO scan_scopes (shard_id, policy_hash) SELECT s.id, 'rules-before-the-change' FROM shards s
		 JOIN codebases c ON c.id = s.codebase_id WHERE c.owner = $1`,
		`INSERT INTO shard_receipts (shard_id, scope_id, fence, complete) SELECT shard_id, id, 1, true FROM scan_scopes
		 WHERE shard_id IN (SELECT s.id FROM shards s JOIN codebases c ON c.id = s.codebase_id WHERE c.owner = $1)`,
		`UPDATE shards s SET checkpoint_receipt_id = r.id FROM shard_receipts r WHERE r.shard_id = s.id AND s.key LIKE 'codebase:%'
		 AND s.codebase_id IN (SELECT id FROM codebases WHERE owner = $1)`,
		`ANALYZE`,
	} {
		var err error
		switch {
		case strings.HasPrefix(q, "INSERT INTO codebases"):
			_, err = pool.Exec(ctx, q, fg.Host(), owner, head, now, n)
		case strings.Contains(q, "$1"):
			_, err = pool.Exec(ctx, q, owner)
		default:
			_, err = pool.Exec(ctx, q)
		}
		if err != nil {
			b.Fatalf("seed: %v\n%s", err, q)
		}
	}
	seeded := time.Since(start)

	// The real ListDue, CheckHeads (heads stubbed) and StartCollects (the
	// client counting its starts).
	const queue = "sweep-bench"
	counter := &startCounter{starts: map[repoid.ID]int{}}
	sweeps := &activities.Sweeps{Store: env.Store, Client: counter, Hosts: hosts, Heads: fixedHead(head), Policy: scanner.Policy()}
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivityWithOptions(sweeps.ListDue, activity.RegisterOptions{Name: "ListDue"})
		w.RegisterActivityWithOptions(sweeps.CheckHeads, activity.RegisterOptions{Name: "CheckHeads"})
		w.RegisterActivityWithOptions(sweeps.StartCollects, activity.RegisterOptions{Name: "StartCollects"})
	})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()

	b.ResetTimer()
	begin := time.Now()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflows.RecollectionSweep,
		workflows.RecollectionSweepInput{Now: now, StartWindow: benchSweepWindow()})
	if err != nil {
		b.Fatal(err)
	}
	first := run.GetRunID() // Get follows the chain to its last run
	wctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	var res workflows.SweepResult
	if err := run.Get(wctx, &res); err != nil {
		b.Fatal(err)
	}
	took := time.Since(begin)
	b.StopTimer()

	chain := sweepChainOf(b, run.GetID(), first)
	largest, most := 0, 0
	for _, r := range chain {
		largest = max(largest, r.events)
		most = max(most, r.activities)
	}
	counter.mu.Lock()
	started, duplicates := 0, 0
	for _, k := range counter.starts {
		started += k
		duplicates += k - 1
	}
	distinct, bad := len(counter.starts), counter.bad
	counter.mu.Unlock()

	fmt.Printf("\nRecollectionSweep over %d synthetic codebases, all due and changed (seeded in %s)\n", n, seeded.Round(time.Millisecond))
	fmt.Printf("  result          %s\n", res)
	fmt.Printf("  runs            %d (%d continue-as-new), chain of %d\n", res.Runs, res.Runs-1, len(chain))
	fmt.Printf("  largest history %d events (at most %d activities in a run)\n", largest, most)
	fmt.Printf("  starts          %d of %d repositories, duplicates %d\n", started, distinct, duplicates)
	fmt.Printf("  sweep           %s (%.0f starts/s, %d starts a StartCollects, %d in flight)\n\n", took.Round(time.Millisecond),
		float64(started)/took.Seconds(), workflows.DefaultStartBatch, cmp.Or(benchSweepWindow(), 8))
	if res.Due != n || res.Started != n || started != n || distinct != n || duplicates != 0 || bad != 0 || res.Halted || len(chain) != res.Runs {
		b.Errorf("want %d due and started once each: result %+v, %d starts of %d repositories, %d duplicates, %d not as StartCollect starts, %d runs in the chain",
			n, res, started, distinct, duplicates, bad, len(chain))
	}
	if largest >= 10_000 {
		b.Errorf("a run's history has %d events", largest)
	}
	b.ReportMetric(took.Seconds(), "s/sweep")
	b.ReportMetric(float64(largest), "events/largest-run")
	b.ReportMetric(float64(res.Runs), "runs")
	b.ReportMetric(float64(duplicates), "duplicates")
}
