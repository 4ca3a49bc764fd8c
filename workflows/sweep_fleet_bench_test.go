package workflows_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/actions"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// The figures the fleet benchmark holds the sweep to (issue 34): at
// 1,000,000 repositories all viewed this week, each is due every 6 hours,
// 4 checks a day: 166,667 checks an hour.
const goalChecksPerHour = 166_667

// benchEnvInt reads a benchmark's integer setting, def when unset.
func benchEnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// benchEnvDuration reads a benchmark's duration setting, def when unset.
func benchEnvDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// slowHead is a stubbed remote: every listing takes latency (what one
// ls-remote to a Git host costs) and finds head.
type slowHead struct {
	head    string
	latency time.Duration
	calls   *atomic.Int64 // listings answered
}

func (h slowHead) RefsDigest(ctx context.Context, _ string) (string, error) {
	t := time.NewTimer(h.latency)
	defer t.Stop()
	select {
	case <-t.C:
		h.calls.Add(1)
		return h.head, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// benchmarkSweepFleet: GITFLEET_BENCH_SWEEP_CODEBASES codebases (default
// 1,000,000, loaded with COPY), every one viewed this week and due (the
// busiest fleet: 4 checks a codebase a day), unchanged behind a stubbed
// remote whose every listing takes GITFLEET_BENCH_SWEEP_LATENCY (default
// 400 ms: 8 listings at a time at 0.4 s are the ~72,000 checks an hour of
// one sweep). For each number of ranges of GITFLEET_BENCH_SWEEP_RANGES
// (default "1,4"), a real pass of real RecollectionSweep workflows (the
// real ListDue, CheckHeads and RecordChecks on PostgreSQL; one worker
// process, the benchmark's) runs for GITFLEET_BENCH_SWEEP_MEASURE (default
// 4m) and is then terminated: the checks made at the remote in its second
// half give the rate, extrapolated to an hour, and the pass's histories
// (its ranges' runs included) and heartbeats the Temporal actions a check
// costs. Each pass runs on a clock 7 hours after the last, so every
// codebase is due again.
func benchmarkSweepFleet(b *testing.B) {
	n := benchEnvInt("GITFLEET_BENCH_SWEEP_CODEBASES", 1_000_000)
	latency := benchEnvDuration("GITFLEET_BENCH_SWEEP_LATENCY", 400*time.Millisecond)
	window := benchEnvDuration("GITFLEET_BENCH_SWEEP_MEASURE", 4*time.Minute)
	var splits []int
	for _, f := range strings.Split(os.Getenv("GITFLEET_BENCH_SWEEP_RANGES"), ",") {
		if k, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && k > 0 {
			splits = append(splits, k)
		}
	}
	if len(splits) == 0 {
		splits = []int{1, 4}
	}
	ctx := context.Background()
	const head = "f1ee7f1ee7f1ee7f1ee7f1ee7f1ee7f1ee7f1ee7"
	scanner, err := activities.NewScanner("", testFindingKey)
	if err != nil {
		b.Fatal(err)
	}
	now := sweepClock()
	owner := fmt.Sprintf("bench-sweep-fleet-%d", now.Unix())
	pool := env.Store.Pool()
	dbBefore := dbSize(b, "pg_database_size(current_database())")
	seeded := sweepFleet(b, owner, n, now, head, scanner.Policy())

	const queue = "sweep-bench-fleet"
	var calls atomic.Int64
	sweeps := &activities.Sweeps{Store: env.Store, Client: &startCounter{starts: map[repoid.ID]int{}}, Hosts: hosts,
		Heads: slowHead{head: head, latency: latency, calls: &calls}, Policy: scanner.Policy()}
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		for name, fn := range map[string]any{"ListDue": sweeps.ListDue, "CheckHeads": sweeps.CheckHeads, "StartCollects": sweeps.StartCollects,
			"RunningCollects": sweeps.RunningCollects, "SweepRanges": sweeps.SweepRanges, "LoadSweepResume": sweeps.LoadSweepResume,
			"SaveSweepResume": sweeps.SaveSweepResume} {
			w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()

	checked := func(at time.Time) int {
		var c int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM codebases WHERE owner = $1 AND last_checked_at = $2`, owner, at).Scan(&c); err != nil {
			b.Fatal(err)
		}
		return c
	}
	// One page of one range, as a sweep reads it at this size.
	plan := explain(b, store.SweepCandidatesNewestQuery, now, int64(math.MaxInt64), now.Add(-91*24*time.Hour), now, 500, []string{}, 0, 1024/max(splits[len(splits)-1], 1))

	type row struct {
		ranges         int
		rate, perCheck float64
		checks         int
		cost           actions.Count
		made           int // checks made (the remote's count)
	}
	var rows []row
	b.ResetTimer()
	for i, ranges := range splits {
		at := now.Add(time.Duration(i) * 7 * time.Hour)
		beats, before := heartbeats(), calls.Load()
		run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflows.RecollectionSweep,
			workflows.RecollectionSweepInput{Now: at, Ranges: ranges, Carry: fmt.Sprintf("%s-%d", owner, ranges)})
		if err != nil {
			b.Fatal(err)
		}
		// Measured over the window's second half, at the remote (the
		// checks made; a page's are recorded together, at its end): the
		// ranges have started and read their first pages.
		sleepCtx(ctx, window/2)
		c0, t0 := calls.Load(), time.Now()
		sleepCtx(ctx, window/2)
		c1, t1 := calls.Load(), time.Now()
		if err := env.Client.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "benchmark window over"); err != nil {
			b.Fatal(err)
		}
		cost, err := actions.Of(ctx, env.Client, run.GetID(), run.GetRunID())
		if err != nil {
			b.Fatal(err)
		}
		cost.Heartbeats = heartbeats() - beats
		total := checked(at)
		rate := float64(c1-c0) / t1.Sub(t0).Hours()
		rows = append(rows, row{ranges: ranges, rate: rate, checks: total, cost: cost, perCheck: float64(cost.Billable()) / float64(max(total, 1)),
			made: int(calls.Load() - before)})
		if c1 == c0 {
			b.Errorf("%d ranges: no check recorded in the window's second half", ranges)
		}
	}
	b.StopTimer()

	dbAfter := dbSize(b, "pg_database_size(current_database())")
	fmt.Printf("\nRecollectionSweep over %d codebases in PostgreSQL, all viewed this week and due (loaded with COPY in %s)\n",
		n, seeded.Round(time.Millisecond))
	fmt.Printf("  stubbed remote: every listing %s (8 at a time a range); one worker process on this machine; a %s window a pass\n",
		latency, window)
	for _, r := range rows {
		verdict := ""
		if n >= 1_000_000 && r.rate < goalChecksPerHour {
			verdict = "  MISSED"
		}
		fmt.Printf("  %3d range(s)   %9.0f checks/hour (goal ≥ %d at 1,000,000)%s\n", r.ranges, r.rate, goalChecksPerHour, verdict)
		fmt.Printf("                 %d checks made, %d recorded in %s (a page's at its end); %.4f actions a recorded check (%s)\n",
			r.made, r.checks, window, r.perCheck, r.cost)
	}
	best := rows[len(rows)-1]
	perDay := 4 * float64(n)
	fmt.Printf("  Temporal actions a day at 4 checks a codebase a day (%.0f checks): %.0f (%d ranges; no goal: capacity input)\n",
		perDay, perDay*best.perCheck, best.ranges)
	fmt.Printf("  database: %s (%s before the load: %s a codebase with its shard, scope and receipt)\n",
		bytesOf(dbAfter), bytesOf(dbBefore), bytesOf(int64(float64(dbAfter-dbBefore)/float64(n))))
	for _, tbl := range []string{"codebases", "shards", "scan_scopes", "shard_receipts", "codebases_sweep_ranged"} {
		fmt.Printf("    %-24s %s\n", tbl, bytesOf(dbSize(b, fmt.Sprintf("pg_total_relation_size('%s')", tbl))))
	}
	fmt.Printf("  a range's page (500 candidates, %d ranges):\n    %s\n\n", splits[len(splits)-1], strings.Join(plan, "\n    "))
	b.ReportMetric(best.rate, "checks/hour")
	b.ReportMetric(best.perCheck, "actions/check")
	b.ReportMetric(float64(dbAfter), "db-bytes")
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func dbSize(b *testing.B, expr string) int64 {
	b.Helper()
	var v int64
	if err := env.Store.Pool().QueryRow(context.Background(), "SELECT "+expr).Scan(&v); err != nil {
		b.Fatal(err)
	}
	return v
}

func bytesOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// explain is a query's plan, run (EXPLAIN ANALYZE) with args.
func explain(b *testing.B, q string, args ...any) []string {
	b.Helper()
	rows, err := env.Store.Pool().Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan = append(plan, line)
	}
	return plan
}
