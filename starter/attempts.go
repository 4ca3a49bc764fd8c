package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

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
