package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/brokenrepo"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/workflows"
)

// Every broken repository of the corpus, scanned the way
// `starter scan <path>` scans it (an ExecuteShard run on the target's
// shard), ends Complete, Partial with a counted reason, or Parked with a
// reason — each activity attempted once: nothing in the corpus can get
// better by retrying, so nothing may be retried (the scan's retry policy
// would allow hours of attempts).
func TestBrokenRepositoriesEndCleanly(t *testing.T) {
	parent := t.TempDir()
	for _, c := range brokenrepo.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			dir, err := c.Build(parent)
			if err != nil {
				t.Fatal(err)
			}
			tg := normalized(t, target.Request{Location: dir})[0]
			res, run := scanToEnd(t, tg)
			checkOutcome(t, c, res)
			checkAttempts(t, run)

			if c.Want == brokenrepo.Partial {
				// Scanning again walks nothing again (the watermarks are at
				// the tips): what could not be read, its holes, is tried
				// again and ends the same way; an oversized blob was
				// recorded as seen (no scan reads it again), and every
				// later scan says it was never scanned: none is Complete.
				again, run := scanToEnd(t, tg)
				checkAttempts(t, run)
				r, a := res.Receipt, again.Receipt
				switch {
				case again.Status != shard.Done || a.Commits != 0:
					t.Errorf("second scan: %s %+v, want Done with no commit walked again", again.Status, a)
				case c.Reason == "oversized" && (a.BlobsScanned+a.BlobsSkipped != 0 || a.Complete || a.EarlierOversized != r.Oversized):
					t.Errorf("second scan: %+v, want nothing new and the %d oversized blobs still said, not Complete", a, r.Oversized)
				case c.Reason != "oversized" && (a.Complete || a.Missing != r.Missing || a.Corrupt != r.Corrupt || a.Lost != r.Lost):
					t.Errorf("second scan: %+v, want the holes of the first (%+v) tried again, in vain", a, r)
				}
			}
			if got := len(findings(t, tg.Key())); got != c.Findings {
				t.Errorf("%d findings, want %d (%s)", got, c.Findings, c.Broken)
			}
		})
	}
}

// checkOutcome checks an ExecuteShard result against what the case wants.
func checkOutcome(t *testing.T, c brokenrepo.Case, res workflows.ExecuteShardResult) {
	t.Helper()
	r := res.Receipt
	switch c.Want {
	case brokenrepo.Parked:
		if res.Status != shard.Parked || res.ParkReason != c.Reason {
			t.Fatalf("%s: %s (%q), want Parked (%q)", c.Broken, res.Status, res.ParkReason, c.Reason)
		}
		return
	case brokenrepo.Complete:
		if res.Status != shard.Done || r == nil || !r.Complete {
			t.Fatalf("%s: %s, receipt %+v; want Done and Complete", c.Broken, res.Status, r)
		}
	case brokenrepo.Partial:
		// The repository is the source: what it lacks or has damaged
		// cannot be recovered, and says so; the shard is Done all the same.
		if res.Status != shard.Done || r == nil || r.Complete || !r.Covered || r.Holes != 0 || r.Lost != r.Missing+r.Corrupt+r.Refused {
			t.Fatalf("%s: %s, receipt %+v; want Done, Partial, its unreadable blobs lost", c.Broken, res.Status, r)
		}
	}
	if c.Commits >= 0 && r.Commits != c.Commits {
		t.Errorf("%d commits diffed, want %d", r.Commits, c.Commits)
	}
	counted := map[string]int64{
		"missing object": r.Missing, "corrupt object": r.Corrupt, "unreadable object": r.Unreadable, "refused object": r.Refused,
		"oversized": r.Oversized, "binary": r.Binary,
	}
	if c.Reason == "" {
		if r.Missing+r.Corrupt+r.Unreadable+r.Refused+r.Oversized+r.Binary+r.RefsIgnored != 0 || r.OutOfTime {
			t.Errorf("nothing should be skipped or ignored: %+v", r.Counts)
		}
		return
	}
	n, isSkip := counted[c.Reason]
	if !isSkip {
		n = r.RefsIgnored // a reason refs are ignored for (gitread.Ignored*)
	}
	if n == 0 {
		t.Errorf("nothing counted as %q: %+v", c.Reason, r.Counts)
	}
	for reason, m := range counted {
		if reason != c.Reason && m != 0 {
			t.Errorf("%d counted as %q, want only %q: %+v", m, reason, c.Reason, r.Counts)
		}
	}
}

// scanToEnd runs the target's ExecuteShard as `starter scan` does and
// returns its result. A run that does not end within the deadline (an
// activity retried over and over) fails the test with what its pending
// activities say, and is terminated.
func scanToEnd(t *testing.T, tg target.Target) (workflows.ExecuteShardResult, client.WorkflowRun) {
	t.Helper()
	run := startScan(t, tg, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res workflows.ExecuteShardResult
	err := run.Get(ctx, &res)
	if parked, ok := workflows.ParkedResult(err); ok { // a parked shard fails its run
		res, err = parked, nil
	}
	if ctx.Err() != nil {
		desc, derr := env.Client.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
		var pending []string
		if derr == nil {
			for _, a := range desc.GetPendingActivities() {
				pending = append(pending, fmt.Sprintf("%s attempt %d: %s", a.GetActivityType().GetName(), a.GetAttempt(),
					a.GetLastFailure().GetMessage()))
			}
		}
		_ = env.Client.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test deadline")
		t.Fatalf("the scan did not end: pending %v (%v)", pending, derr)
	}
	if err != nil {
		t.Fatalf("the scan failed: %v", err)
	}
	return res, run
}

// checkAttempts reads the run's history: every activity it scheduled ran
// exactly once, and within what its retry policy allows.
func checkAttempts(t *testing.T, run client.WorkflowRun) {
	t.Helper()
	type sched struct {
		name string
		max  int32
	}
	scheduled := map[int64]sched{}
	scans := 0
	it := env.Client.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[e.GetEventId()] = sched{a.GetActivityType().GetName(), a.GetRetryPolicy().GetMaximumAttempts()}
			if a.GetActivityType().GetName() == "ScanShard" {
				scans++
			}
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			s := scheduled[a.GetScheduledEventId()]
			if a.GetAttempt() != 1 || s.max > 0 && a.GetAttempt() > s.max {
				t.Errorf("%s ran %d attempts (policy: at most %d, 0 = unbounded); the last failure: %s",
					s.name, a.GetAttempt(), s.max, a.GetLastFailure().GetMessage())
			}
		}
	}
	if scans > 1 {
		t.Errorf("ScanShard scheduled %d times: the run took new leases", scans)
	}
}
