package workflows_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/actions"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
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
//
// outage: the same fleet, all due, through an hour-long Git host outage
// and after it (see benchmarkSweepOutage).
//
// fleet: 1,000,000 codebases (GITFLEET_BENCH_SWEEP_CODEBASES), the check
// rate of a pass in 1 and in more ranges behind a remote that answers as
// a Git host does (see benchmarkSweepFleet).
func BenchmarkSweep(b *testing.B) {
	b.Run("unchanged", benchmarkSweepUnchanged)
	b.Run("all-changed", benchmarkSweepAllChanged)
	b.Run("outage", benchmarkSweepOutage)
	b.Run("fleet", benchmarkSweepFleet)
}

func benchmarkSweepUnchanged(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	const head = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"
	scanner, err := activities.NewScanner("", testFindingKey)
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
	rows, err := pool.Query(ctx, "EXPLAIN "+store.SweepCandidatesQuery, now.Add(-91*24*time.Hour), 0, now.Add(-91*24*time.Hour), now, 1000, []string{}, 0, 1024)
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
	beats := heartbeats()
	res, first := runSweepB(b, workflows.RecollectionSweepInput{Now: now, PageSize: 1000})
	took := time.Since(begin)
	b.StopTimer()
	cost := measured(b, first, beats)
	if res.Started != 0 || res.Halted {
		b.Fatalf("sweep with unchanged heads: %+v", res)
	}
	fmt.Printf("\nRecollectionSweep over %d synthetic codebases (seeded in %s)\n", n, seeded.Round(time.Millisecond))
	fmt.Printf("  result          %s, %d runs (continue-as-new)\n", res, res.Runs)
	fmt.Printf("  sweep           %s\n", took.Round(time.Millisecond))
	fmt.Printf("  decisions/s     %.0f\n", float64(res.Considered)/took.Seconds())
	fmt.Printf("  candidate query plan:\n    %s\n", strings.Join(plan, "\n    "))
	printActions(fmt.Sprintf("Temporal actions of a sweep of %d unchanged codebases (every run continued as new)", n),
		[]actionRow{{fmt.Sprintf("sweep, %d unchanged", n), cost, -1, -1}})
	usesIndex := strings.Contains(strings.Join(plan, "\n"), "codebases_sweep")
	if !usesIndex {
		b.Errorf("the candidate query does not use codebases_sweep")
	}
	b.ReportMetric(took.Seconds(), "s/sweep")
	b.ReportMetric(float64(res.Considered)/took.Seconds(), "decisions/s")
	b.ReportMetric(float64(cost.Billable()), "actions/sweep")
}

// runSweepB runs a sweep to its end and returns its result and its first
// run (the run Get returns from follows continue-as-new to the last).
func runSweepB(b *testing.B, in workflows.RecollectionSweepInput) (workflows.SweepResult, actions.Run) {
	b.Helper()
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.RecollectionSweep, in)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var res workflows.SweepResult
	first := actions.Run{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	if err := run.Get(ctx, &res); err != nil {
		b.Fatal(err)
	}
	return res, first
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

// startCounter stands in for the Temporal client of StartCollects and
// RunningCollects: it counts the Collect starts of each repository, and
// those not made as StartCollect makes them (the repository's workflow id,
// use-existing). A Collect it started runs for runFor (none, if zero), as
// its count of running Collects says; peak is the most that ran at once.
type startCounter struct {
	client.Client
	runFor time.Duration
	mu     sync.Mutex
	starts map[repoid.ID]int
	bad    int
	ends   []time.Time // of the runs, in start order
	peak   int
}

func (c *startCounter) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	in := args[0].(workflows.CollectInput)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts[in.Repo]++
	if o.ID != workflows.CollectWorkflowID(in.Repo) || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		c.bad++
	}
	if c.runFor > 0 {
		c.ends = append(c.ends, time.Now().Add(c.runFor))
		c.peak = max(c.peak, c.runningLocked())
	}
	return nil, nil
}

func (c *startCounter) runningLocked() int {
	now := time.Now()
	// Runs end in start order: the running ones are a suffix.
	i, _ := slices.BinarySearchFunc(c.ends, now, func(e, t time.Time) int { return e.Compare(t) })
	c.ends = c.ends[i:]
	return len(c.ends)
}

func (c *startCounter) CountWorkflow(context.Context, *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &workflowservice.CountWorkflowExecutionsResponse{Count: int64(c.runningLocked())}, nil
}

func benchmarkSweepAllChanged(b *testing.B) {
	n := benchSweepN()
	ctx := context.Background()
	const head = "c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ff"
	scanner, err := activities.NewScanner("", testFindingKey)
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
		w.RegisterActivityWithOptions(sweeps.RunningCollects, activity.RegisterOptions{Name: "RunningCollects"})
	})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()

	b.ResetTimer()
	begin := time.Now()
	// The start rate, not the bound on running Collects, is measured here
	// (the counter's Collects end at once; outage measures the bound).
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflows.RecollectionSweep,
		workflows.RecollectionSweepInput{Now: now, StartWindow: benchSweepWindow(), MaxRunning: n + workflows.DefaultStartBatch})
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

// outageHeads is a Git host in trouble: while fault is set, every listing
// fails with it (nil: the host is back, and every repository has moved on
// since its last collection).
type outageHeads struct {
	mu    sync.Mutex
	fault error
}

func (h *outageHeads) RefsDigest(context.Context, string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fault != nil {
		return "", h.fault
	}
	return "after-the-outage", nil
}

func (h *outageHeads) set(err error) {
	h.mu.Lock()
	h.fault = err
	h.mu.Unlock()
}

// hostFaults are the ways a Git host (or the way to it) fails for every
// repository at once, as ls-remote reports them.
var hostFaults = []struct {
	name string
	err  error
}{
	{"proxy answers 404", fmt.Errorf("list refs: %w", transport.ErrRepositoryNotFound)},
	{"proxy answers 401", fmt.Errorf("list refs: %w", transport.ErrAuthenticationRequired)},
	{"proxy answers 403", fmt.Errorf("list refs: %w", transport.ErrAuthorizationFailed)},
	{"TLS to a plain server", errors.New("list refs: Get \"https://git.example/o/r.git/info/refs\": http: server gave HTTP response to HTTPS client")},
	{"connection refused", fmt.Errorf("list refs: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})},
	{"unknown host", fmt.Errorf("list refs: %w", &net.DNSError{Err: "no such host", Name: "git.example", IsNotFound: true})},
	{"503", errclass.Wrap(errclass.Retryable, "server error 503", errors.New("list refs: 503 Service Unavailable"))},
}

// benchmarkSweepOutage: n codebases (GITFLEET_BENCH_SWEEP_N), all due; the
// Git host is down for an hour. A sweep every 8 or 9 minutes of it (the
// schedule runs hourly: more than it would) meets the host failing each
// way hostFaults lists, for every repository; each halts at the circuit
// breaker and charges no repository: none has a failure or is excluded
// from the sweep, none was recorded as checked. The sweep after the outage
// starts every one of them, once, never more than MaxRunning Collects
// running at a time (the counter's Collects run for 3 seconds each). Real
// ListDue, CheckHeads (its control check included), RunningCollects and
// StartCollects, on a task queue of the benchmark's own.
func benchmarkSweepOutage(b *testing.B) {
	n := benchSweepN()
	ctx := context.Background()
	scanner, err := activities.NewScanner("", testFindingKey)
	if err != nil {
		b.Fatal(err)
	}
	now := sweepClock()
	owner := fmt.Sprintf("bench-sweep-outage-%d", now.Unix())
	start := time.Now()
	pool := env.Store.Pool()
	// Views 0–89 days ago, completed 8 days ago (due in every band), scanned
	// under the current rules.
	for _, q := range []string{
		`INSERT INTO codebases (host, external_repo_id, owner, name, last_commit_sha, last_refs_digest, last_viewed_at, last_completed_at)
		 SELECT $1, $2 || '-' || i, $2, 'r' || i, 'c0ffee', 'before-the-outage', $3::timestamptz - (i % 90) * interval '1 day' - (i % 7) * interval '1 hour',
			$3::timestamptz - interval '8 days'
		 FROM generate_series(1, $4) AS i`,
		`INSERT INTO shards (key, codebase_id, location, status)
		 SELECT 'codebase:' || id, id, 'http://bench.invalid/' || name, 'Done' FROM codebases WHERE owner = $1`,
		`INSERT INTO scan_scopes (shard_id, policy_hash) SELECT s.id, $2 FROM shards s
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
			_, err = pool.Exec(ctx, q, fg.Host(), owner, now, n)
		case strings.Contains(q, "$2"):
			_, err = pool.Exec(ctx, q, owner, scanner.Policy())
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

	const queue = "sweep-bench-outage"
	const maxRunning = 1000
	heads := &outageHeads{}
	counter := &startCounter{starts: map[repoid.ID]int{}, runFor: 3 * time.Second}
	sweeps := &activities.Sweeps{Store: env.Store, Client: counter, Hosts: hosts, Heads: heads, Policy: scanner.Policy()}
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivityWithOptions(sweeps.ListDue, activity.RegisterOptions{Name: "ListDue"})
		w.RegisterActivityWithOptions(sweeps.CheckHeads, activity.RegisterOptions{Name: "CheckHeads"})
		w.RegisterActivityWithOptions(sweeps.StartCollects, activity.RegisterOptions{Name: "StartCollects"})
		w.RegisterActivityWithOptions(sweeps.RunningCollects, activity.RegisterOptions{Name: "RunningCollects"})
	})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	sweep := func(at time.Time) workflows.SweepResult {
		run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflows.RecollectionSweep,
			workflows.RecollectionSweepInput{Now: at, MaxRunning: maxRunning, RunningPoll: 250 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		var res workflows.SweepResult
		if err := run.Get(wctx, &res); err != nil {
			b.Fatal(err)
		}
		return res
	}
	struck := func() (failures, excluded, checked int) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE consecutive_failures > 0),
				count(*) FILTER (WHERE consecutive_failures >= 5), count(*) FILTER (WHERE last_checked_at IS NOT NULL)
			FROM codebases WHERE owner = $1`, owner).Scan(&failures, &excluded, &checked); err != nil {
			b.Fatal(err)
		}
		return failures, excluded, checked
	}

	b.ResetTimer()
	begin := time.Now()
	fmt.Printf("\nRecollectionSweep over %d synthetic codebases, all due, through an hour-long Git host outage (seeded in %s)\n",
		n, seeded.Round(time.Millisecond))
	for i, f := range hostFaults {
		heads.set(f.err)
		at := now.Add(time.Duration(i) * time.Hour / time.Duration(len(hostFaults)))
		t0 := time.Now()
		res := sweep(at)
		failures, excluded, checked := struck()
		fmt.Printf("  +%-6s %-22s %s (%s)\n", at.Sub(now).Round(time.Minute), f.name, res, time.Since(t0).Round(time.Millisecond))
		if !res.Halted || res.Gone != 0 || res.Started != 0 || failures != 0 || excluded != 0 || checked != 0 {
			b.Fatalf("sweep during the outage (%s): %+v; %d codebases with failures, %d excluded, %d recorded as checked; want halted, nobody charged",
				f.name, res, failures, excluded, checked)
		}
	}
	outage := time.Since(begin)
	heads.set(nil)
	t0 := time.Now()
	res := sweep(now.Add(time.Hour))
	after := time.Since(t0)
	b.StopTimer()

	counter.mu.Lock()
	started, duplicates := 0, 0
	for _, k := range counter.starts {
		started += k
		duplicates += k - 1
	}
	distinct, bad, peak := len(counter.starts), counter.bad, counter.peak
	counter.mu.Unlock()
	failures, excluded, _ := struck()
	fmt.Printf("  +1h     the host is back       %s (%s)\n", res, after.Round(time.Millisecond))
	fmt.Printf("  charged to repositories during the outage: %d failures, %d excluded from the sweep\n", failures, excluded)
	fmt.Printf("  after it: %d of %d repositories started (duplicates %d), at most %d Collects running (bound %d), %.0f starts/s\n\n",
		distinct, n, duplicates, peak, maxRunning, float64(started)/after.Seconds())
	if res.Halted || res.Started != n || started != n || distinct != n || duplicates != 0 || bad != 0 || peak > maxRunning || failures != 0 {
		b.Errorf("after the outage: %+v, %d starts of %d repositories, %d duplicates, %d not as StartCollect, peak %d running; want all %d started once, at most %d running",
			res, started, distinct, duplicates, bad, peak, n, maxRunning)
	}
	b.ReportMetric(outage.Seconds(), "s/outage-sweeps")
	b.ReportMetric(after.Seconds(), "s/recovery-sweep")
	b.ReportMetric(float64(excluded), "excluded")
	b.ReportMetric(float64(peak), "peak-running")
}
