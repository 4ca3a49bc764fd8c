// Package actions counts what a workflow run costs on Temporal: the
// actions Temporal Cloud bills, and the history events a self-hosted
// cluster stores, read from the run's real history and its children's
// (architecture, "Capacity"). The benchmarks print them per operation.
//
// Rules: development and test tooling. Only tests and other devstack
// packages import it; the production binaries never link it
// (layout_test.go checks).
package actions

import (
	"context"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// Count is what one operation cost: its runs (the first, its children,
// and runs continued as new) summed.
type Count struct {
	// Workflows started: the first run, children and continued runs.
	Workflows int
	// Children started (counted in Workflows too).
	Children int
	// ContinuedAsNew runs (counted in Workflows too).
	ContinuedAsNew int
	// Activities: attempts started, retries included (each is billed).
	Activities int
	// Retries among Activities.
	Retries int
	// LocalActivities recorded (markers).
	LocalActivities int
	// Heartbeats the workers sent; no history holds them, the caller
	// counts them at its client (see testenv.Env.RPCs) and adds them.
	Heartbeats int64
	Timers     int
	// SignalsReceived by the runs; SignalsSent by them to others.
	SignalsReceived, SignalsSent int
	// Upserts of search attributes, and of the memo (workflow properties
	// modified).
	Upserts, Memos int
	// SideEffects recorded (SideEffect and MutableSideEffect markers).
	SideEffects int
	// Versions recorded (GetVersion markers): stored, not billed.
	Versions int
	// Updates accepted.
	Updates int
	// Events in the histories: what a self-hosted cluster stores.
	Events int
}

// Billable is the sum of what Temporal Cloud bills as actions, as its
// pricing page lists them: starts (client, child, continue-as-new),
// activity attempts and heartbeats, local activities, timers, signals,
// search-attribute and memo upserts, side effects and updates. Version
// markers are stored but not billed. (Cloud bills the local activities of
// one workflow task as one action: this counts each, an upper bound.)
func (c Count) Billable() int64 {
	return int64(c.Workflows+c.Activities+c.LocalActivities+c.Timers+c.SignalsReceived+c.SignalsSent+
		c.Upserts+c.Memos+c.SideEffects+c.Updates) + c.Heartbeats
}

// Add sums two counts.
func (c Count) Add(o Count) Count {
	return Count{
		Workflows: c.Workflows + o.Workflows, Children: c.Children + o.Children, ContinuedAsNew: c.ContinuedAsNew + o.ContinuedAsNew,
		Activities: c.Activities + o.Activities, Retries: c.Retries + o.Retries, LocalActivities: c.LocalActivities + o.LocalActivities,
		Heartbeats: c.Heartbeats + o.Heartbeats, Timers: c.Timers + o.Timers,
		SignalsReceived: c.SignalsReceived + o.SignalsReceived, SignalsSent: c.SignalsSent + o.SignalsSent,
		Upserts: c.Upserts + o.Upserts, Memos: c.Memos + o.Memos, SideEffects: c.SideEffects + o.SideEffects,
		Versions: c.Versions + o.Versions, Updates: c.Updates + o.Updates, Events: c.Events + o.Events,
	}
}

// String is one line: the billable total, then each kind that is not zero.
func (c Count) String() string {
	parts := []string{fmt.Sprintf("%d actions", c.Billable())}
	for _, p := range []struct {
		n    int64
		name string
	}{
		{int64(c.Workflows), "workflows"}, {int64(c.Children), "of them children"}, {int64(c.ContinuedAsNew), "continued as new"},
		{int64(c.Activities), "activities"}, {int64(c.Retries), "of them retries"}, {int64(c.LocalActivities), "local activities"},
		{c.Heartbeats, "heartbeats"}, {int64(c.Timers), "timers"},
		{int64(c.SignalsReceived), "signals received"}, {int64(c.SignalsSent), "signals sent"},
		{int64(c.Upserts), "search-attribute upserts"}, {int64(c.Memos), "memo upserts"},
		{int64(c.SideEffects), "side effects"}, {int64(c.Updates), "updates"},
		{int64(c.Versions), "version markers (not billed)"}, {int64(c.Events), "history events"},
	} {
		if p.n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.name))
		}
	}
	return strings.Join(parts, ", ")
}

// Run is one workflow run.
type Run struct{ WorkflowID, RunID string }

// Tally counts one run's history. It returns the children it started
// (their runs, to count next) and the run it continued as, if any.
func Tally(events []*historypb.HistoryEvent) (c Count, children []Run, next string) {
	for _, e := range events {
		c.Events++
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.Workflows++
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
			c.Children++
			x := e.GetChildWorkflowExecutionStartedEventAttributes().GetWorkflowExecution()
			children = append(children, Run{x.GetWorkflowId(), x.GetRunId()})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			next = e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// Recorded once, for the attempt that ended the activity: its
			// number says how many were started.
			n := max(int(e.GetActivityTaskStartedEventAttributes().GetAttempt()), 1)
			c.Activities += n
			c.Retries += n - 1
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			// An activity that ended without a started event (timed out in
			// the queue, cancelled before it started) was scheduled, not run.
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.Timers++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			c.SignalsReceived++
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			c.SignalsSent++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			c.Upserts++
		case enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			c.Memos++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			c.Updates++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			switch e.GetMarkerRecordedEventAttributes().GetMarkerName() {
			case "LocalActivity":
				c.LocalActivities++
			case "SideEffect", "MutableSideEffect":
				c.SideEffects++
			case "Version":
				c.Versions++
			}
		}
	}
	if next != "" {
		c.ContinuedAsNew++ // the next run's start is counted with its history
	}
	return c, children, next
}

// Of counts the run workflowID/runID ("" for the latest), every child it
// started, theirs in turn, and the runs each continued as.
func Of(ctx context.Context, c client.Client, workflowID, runID string) (Count, error) {
	var total Count
	queue := []Run{{workflowID, runID}}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		var events []*historypb.HistoryEvent
		it := c.GetWorkflowHistory(ctx, r.WorkflowID, r.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return total, fmt.Errorf("history of %s/%s: %w", r.WorkflowID, r.RunID, err)
			}
			events = append(events, e)
		}
		n, children, next := Tally(events)
		total = total.Add(n)
		queue = append(queue, children...)
		if next != "" {
			queue = append(queue, Run{r.WorkflowID, next})
		}
	}
	return total, nil
}
