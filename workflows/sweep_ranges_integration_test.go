package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"gitfleet/activities"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/sweeprange"
	"gitfleet/workflows"
)

// sweepFleet seeds n codebases of owner, loaded with COPY, each with a
// Done shard scanned under policy at head (so a check that finds head
// finds it unchanged): views spread over the last week before now (the
// decay's busiest band, refreshed every 6 hours), completed 7 hours before
// now, so every one is due. It returns how long the load took.
func sweepFleet(tb testing.TB, owner string, n int, now time.Time, head, policy string) time.Duration {
	tb.Helper()
	ctx := context.Background()
	begin := time.Now()
	pool := env.Store.Pool()
	done := now.Add(-7 * time.Hour)
	rows := pgx.CopyFromFunc(func() func() ([]any, error) {
		i := 0
		return func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			i++
			viewed := now.Add(-time.Duration(i%(7*24*60)) * time.Minute)
			return []any{fg.Host(), fmt.Sprintf("%s-%d", owner, i), owner, fmt.Sprintf("r%d", i), head, head, viewed, done}, nil
		}
	}())
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"codebases"},
		[]string{"host", "external_repo_id", "owner", "name", "last_commit_sha", "last_refs_digest", "last_viewed_at", "last_completed_at"}, rows); err != nil {
		tb.Fatalf("copy codebases: %v", err)
	}
	// The rows derived from them, in PostgreSQL (no row crosses the wire).
	for _, q := range []string{
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
		case strings.Contains(q, "$2"):
			_, err = pool.Exec(ctx, q, owner, policy)
		case strings.Contains(q, "$1"):
			_, err = pool.Exec(ctx, q, owner)
		default:
			_, err = pool.Exec(ctx, q)
		}
		if err != nil {
			tb.Fatalf("seed: %v\n%s", err, q)
		}
	}
	return time.Since(begin)
}

// checkCounter answers the change checks of one owner's repositories with
// head, counting them by URL; while gate is open (not nil), the first
// check waits on it, and blocked is closed as it does.
type checkCounter struct {
	owner, head string
	mu          sync.Mutex
	checks      map[string]int
	gate        chan struct{}
	blocked     chan struct{}
	once        sync.Once
}

func (c *checkCounter) answer(ctx context.Context, url string) (string, bool, error) {
	if !strings.Contains(url, "/"+c.owner+"/") {
		return "", false, nil
	}
	c.mu.Lock()
	c.checks[url]++
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		c.once.Do(func() { close(c.blocked) })
		select {
		case <-gate:
		case <-ctx.Done():
			return "", true, ctx.Err()
		}
	}
	return c.head, true, nil
}

// counts are the checks of each repository so far: how many were checked
// k times, by k.
func (c *checkCounter) counts() map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]int{}
	for _, k := range c.checks {
		out[k]++
	}
	return out
}

// The scheduled sweep splits the fleet into ranges, a sweep each, and a
// change of their number while a pass runs neither checks a codebase
// twice nor leaves one out. 60 due codebases; the schedule set to 2
// ranges; its pass is held inside one range's first check; the schedule
// applied again with 3 ranges and triggered: the pass running, the
// trigger is skipped, no 3-range sweep starts. Released, the 2-range pass
// (recollection-sweep:0-of-2 and 1-of-2) checks every codebase exactly
// once. The next pass, in 3 ranges (recollection-sweep:k-of-3), checks
// none again (all were checked, none due); once they are due again, the
// pass after checks each exactly once more.
func TestSweepRangesAcrossAChangeOfRanges(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	const n = 60
	const head = "4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a"
	scanner, err := activities.NewScanner("", testFindingKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC() // the schedule's sweeps run on the real clock
	sweepFleet(t, o, n, now, head, scanner.Policy())
	c := &checkCounter{owner: o, head: head, checks: map[string]int{}, gate: make(chan struct{}), blocked: make(chan struct{})}
	heads.mu.Lock()
	heads.hook = c.answer
	heads.mu.Unlock()
	t.Cleanup(func() {
		heads.mu.Lock()
		heads.hook = nil
		heads.mu.Unlock()
		c.mu.Lock()
		if c.gate != nil {
			close(c.gate)
			c.gate = nil
		}
		c.mu.Unlock()
	})
	apply := func(ranges int) {
		t.Helper()
		if err := workflows.EnsureSchedules(ctx, env.Client, workflows.ScheduleConfig{SweepEvery: 240 * time.Hour,
			CleanupEvery: 240 * time.Hour, Sweep: workflows.RecollectionSweepInput{Ranges: ranges}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = workflows.EnsureSchedules(ctx, env.Client, workflows.ScheduleConfig{}) })
	h := env.Client.ScheduleClient().GetHandle(ctx, workflows.SweepScheduleID)
	describe := func() *client.ScheduleDescription {
		t.Helper()
		d, err := h.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// exists reports whether the workflow id ran since start.
	exists := func(id string, since time.Time) bool {
		t.Helper()
		d, err := env.Client.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return !d.GetWorkflowExecutionInfo().GetStartTime().AsTime().Before(since)
	}
	waitIdle := func(what string) {
		t.Helper()
		poll.Until(t, what, 2*time.Minute, func() (bool, string) {
			d := describe()
			return len(d.Info.RunningWorkflows) == 0, fmt.Sprintf("%d running", len(d.Info.RunningWorkflows))
		})
	}
	want := func(what string, k int) {
		t.Helper()
		if got := c.counts(); len(got) != 1 || got[k] != n {
			t.Fatalf("%s: repositories by times checked %v, want all %d checked %d times", what, got, n, k)
		}
	}
	apply(2)
	waitIdle("no sweep running before the test")
	start := time.Now()
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.blocked:
	case <-time.After(2 * time.Minute): // a bound for a regression only
		t.Fatal("the pass never checked a repository of the test")
	}
	for k := range 2 {
		id := workflows.SweepRangeWorkflowID(workflows.SweepScheduleID, sweeprange.Range{K: k, N: 2})
		if !exists(id, start) {
			t.Fatalf("no %s: the pass is not split in 2", id)
		}
	}
	// The number of ranges changes while the pass runs.
	apply(3)
	skipped := describe().Info.NumActionsSkippedOverlap
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the trigger skipped while the pass runs", time.Minute, func() (bool, string) {
		d := describe()
		return d.Info.NumActionsSkippedOverlap > skipped, fmt.Sprintf("%d skipped", d.Info.NumActionsSkippedOverlap)
	})
	for k := range 3 {
		if id := workflows.SweepRangeWorkflowID(workflows.SweepScheduleID, sweeprange.Range{K: k, N: 3}); exists(id, start) {
			t.Fatalf("%s started while the 2-range pass ran", id)
		}
	}
	c.mu.Lock()
	close(c.gate)
	c.gate = nil
	c.mu.Unlock()
	waitIdle("the 2-range pass ends")
	want("the 2-range pass", 1)

	// The next pass, in 3 ranges: nothing is due again.
	second := time.Now()
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the 3-range pass starts and ends", 2*time.Minute, func() (bool, string) {
		d := describe()
		return exists(workflows.SweepRangeWorkflowID(workflows.SweepScheduleID, sweeprange.Range{K: 2, N: 3}), second) &&
			len(d.Info.RunningWorkflows) == 0, fmt.Sprintf("%d running", len(d.Info.RunningWorkflows))
	})
	want("the 3-range pass after the 2-range one", 1)

	// Due again (their last check 7 hours ago): the 3-range pass checks
	// each once more.
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE codebases SET last_checked_at = $2 WHERE owner = $1`, o, now.Add(-7*time.Hour)); err != nil {
		t.Fatal(err)
	}
	third := time.Now()
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the next 3-range pass starts and ends", 2*time.Minute, func() (bool, string) {
		d := describe()
		return exists(workflows.SweepRangeWorkflowID(workflows.SweepScheduleID, sweeprange.Range{K: 0, N: 3}), third) &&
			len(d.Info.RunningWorkflows) == 0, fmt.Sprintf("%d running", len(d.Info.RunningWorkflows))
	})
	want("the 3-range pass of due codebases", 2)
	var unchecked int
	if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM codebases WHERE owner = $1 AND last_checked_at < $2`,
		o, third).Scan(&unchecked); err != nil || unchecked != 0 {
		t.Fatalf("%d codebases not recorded as checked by the last pass (%v)", unchecked, err)
	}
}

// A pass in 2 ranges collects every due and changed repository once,
// through a sweep a range named after the pass (<carry>:0-of-2, 1-of-2),
// each reading only its own range, and counts them all in its result.
// recollection-sweep-ranges.json holds the pass (GetVersion sweep-ranges),
// recollection-sweep-range.json a range's sweep.
func TestSweepPassInRanges(t *testing.T) {
	now := sweepClock()
	o := owner(t)
	var repos []sweepRepo
	for i := range 6 {
		repos = append(repos, sweepRepo{name: fmt.Sprintf("r%d", i), viewed: ago(day), done: ago(10 * time.Hour), changeAfterDone: true})
	}
	ids := setUp(t, now, o, repos)
	since := time.Now()
	// A Carry of its own, as the schedule's: the ranges are named after it
	// (a pass without one names them after its workflow id, which a
	// replay outside the server does not have).
	carry := "sweep-pass-" + o
	res, run := runSweepRun(t, workflows.RecollectionSweepInput{Now: now, Ranges: 2, MaxRunning: 1000, Carry: carry})
	if res.Ranges != 2 || res.Started != len(repos) || res.Due != len(repos) || res.Halted {
		t.Fatalf("pass in 2 ranges: %+v; want %d due and started in 2 ranges", res, len(repos))
	}
	var perRange []int
	for k := range 2 {
		cid := workflows.SweepRangeWorkflowID(carry, sweeprange.Range{K: k, N: 2})
		var r workflows.SweepResult
		if err := env.Client.GetWorkflow(context.Background(), cid, "").Get(ctxTimeout(t, time.Minute), &r); err != nil {
			t.Fatalf("%s: %v", cid, err)
		}
		perRange = append(perRange, r.Considered)
		if k == 0 {
			recordHistory(t, "recollection-sweep-range", cid, firstRunOf(t, cid))
		}
	}
	if perRange[0]+perRange[1] != res.Considered {
		t.Fatalf("the ranges considered %v, the pass %d", perRange, res.Considered)
	}
	recordHistory(t, "recollection-sweep-ranges", run.GetID(), run.GetRunID())
	for _, r := range repos {
		waitCompleted(t, ids[r.name], since)
	}
}

// firstRunOf is the first run of a workflow id (its latest run's chain
// starts there).
func firstRunOf(t *testing.T, workflowID string) string {
	t.Helper()
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetFirstRunId()
}
