package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"gitfleet/activities"
)

// attemptsEvery is how often a waiting command looks at a run's pending
// activities.
var attemptsEvery = 2 * time.Second

// watchAttempts tells the user, while a command waits for a run, each
// retry of one of its activities: "attempt 3, retrying in 40s: no such
// host", read from the pending activity's attempt and last failure
// (DescribeWorkflowExecution). Without it a run whose activity keeps
// failing looks like a run that hangs. stop ends the watch.
func (a *app) watchAttempts(ctx context.Context, c client.Client, id, runID, what string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(attemptsEvery)
		defer tick.Stop()
		told := map[string]int32{} // activity id → attempt told
		said := ""                 // the last progress line
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			d, err := c.DescribeWorkflowExecution(ctx, id, runID)
			if err != nil {
				continue // the next tick asks again; the wait itself reports real trouble
			}
			for _, p := range d.GetPendingActivities() {
				if line := scanProgress(p); line != "" && line != said {
					said = line
					fmt.Fprintf(a.stderr, "  progress  %s\n", line)
				}
				f := p.GetLastFailure()
				if p.GetAttempt() < 2 || f == nil || told[p.GetActivityId()] >= p.GetAttempt() {
					continue
				}
				told[p.GetActivityId()] = p.GetAttempt()
				line := fmt.Sprintf("%s: %s attempt %d", what, p.GetActivityType().GetName(), p.GetAttempt()-1)
				if next := p.GetNextAttemptScheduleTime(); next != nil && p.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED {
					line += fmt.Sprintf(" failed, retrying in %s", max(time.Until(next.AsTime()), 0).Round(time.Second))
				} else {
					line += " failed, retrying"
				}
				fmt.Fprintf(a.stderr, "%s: %s\n", line, lastCause(f.GetMessage()))
			}
		}
	}()
	return func() { cancel(); <-done }
}

// scanProgress is what a scan attempt has done so far, from the counts its
// heartbeats carry (activities' progress: commits walked, blobs scanned and
// written, their bytes, findings), or "" for another activity or none yet.
// A large repository takes minutes: without it the scan looks stuck.
func scanProgress(p *workflowpb.PendingActivityInfo) string {
	if p.GetActivityType().GetName() != scanActivity || p.GetHeartbeatDetails() == nil {
		return ""
	}
	var c map[string]int64
	if err := converter.GetDefaultDataConverter().FromPayloads(p.GetHeartbeatDetails(), &c); err != nil || c == nil {
		return ""
	}
	line := fmt.Sprintf("%s walked, %s scanned (%s), %s so far", count(c["commits"], "commit", "commits"),
		count(c["blobs"], "blob", "blobs"), bytesHuman(c["bytes"]), count(c["findings"], "finding", "findings"))
	if p.GetAttempt() > 1 {
		line += fmt.Sprintf(" (attempt %d)", p.GetAttempt())
	}
	return line
}

// scanActivity is the activity that walks and scans a shard.
const scanActivity = "ScanShard"

// lastCause is the end of an error message, its cause ("no such host"),
// at most a line's worth.
func lastCause(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg)-i < 120 {
		msg = msg[i+2:]
	}
	return escapeControl(shortenLine(msg, 200))
}

func shortenLine(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// unreachableSpan is how long the workers keep trying an unreachable host
// (activities.DefaultUnreachableWaits).
func unreachableSpan() time.Duration {
	var d time.Duration
	for _, w := range activities.DefaultUnreachableWaits {
		d += w
	}
	return d
}
