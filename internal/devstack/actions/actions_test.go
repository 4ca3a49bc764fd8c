package actions

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

func ev(t enumspb.EventType) *historypb.HistoryEvent { return &historypb.HistoryEvent{EventType: t} }

func started(attempt int32) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
		Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: attempt}}}
}

func marker(name string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
		Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
			MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: name}}}
}

func child(id, run string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_ChildWorkflowExecutionStartedEventAttributes{
			ChildWorkflowExecutionStartedEventAttributes: &historypb.ChildWorkflowExecutionStartedEventAttributes{
				WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: run}}}}
}

func continued(run string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes{
			WorkflowExecutionContinuedAsNewEventAttributes: &historypb.WorkflowExecutionContinuedAsNewEventAttributes{NewExecutionRunId: run}}}
}

func TestTally(t *testing.T) {
	for _, tc := range []struct {
		name     string
		events   []*historypb.HistoryEvent
		want     Count
		billable int64
		children []Run
		next     string
	}{
		{
			name: "activities, retries and what is not billed",
			events: []*historypb.HistoryEvent{
				ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED),
				ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
				ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), started(1),
				ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), started(3), // two retries before it
				ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT), // never started
				marker("Version"), marker("LocalActivity"), marker("MutableSideEffect"),
				ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES), ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
				ev(enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED),
				ev(enumspb.EVENT_TYPE_TIMER_STARTED), ev(enumspb.EVENT_TYPE_TIMER_FIRED),
				ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
				ev(enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED),
				ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED),
			},
			want: Count{Workflows: 1, Activities: 4, Retries: 2, LocalActivities: 1, SideEffects: 1, Versions: 1,
				Upserts: 2, Memos: 1, Timers: 1, SignalsReceived: 1, SignalsSent: 1, Events: 19},
			billable: 1 + 4 + 1 + 1 + 2 + 1 + 1 + 1 + 1,
		},
		{
			name: "children and continue-as-new",
			events: []*historypb.HistoryEvent{
				ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED),
				ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED), child("c1", "r1"),
				ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED), child("c2", "r2"),
				continued("r9"),
			},
			want:     Count{Workflows: 1, Children: 2, ContinuedAsNew: 1, Events: 6},
			billable: 1, // the children's and the next run's starts are counted with their own histories
			children: []Run{{"c1", "r1"}, {"c2", "r2"}},
			next:     "r9",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, children, next := Tally(tc.events)
			if got != tc.want {
				t.Errorf("Tally = %+v\nwant    %+v", got, tc.want)
			}
			if got.Billable() != tc.billable {
				t.Errorf("Billable = %d, want %d", got.Billable(), tc.billable)
			}
			if len(children) != len(tc.children) || next != tc.next {
				t.Fatalf("children %v next %q, want %v %q", children, next, tc.children, tc.next)
			}
			for i := range children {
				if children[i] != tc.children[i] {
					t.Errorf("child %d = %v, want %v", i, children[i], tc.children[i])
				}
			}
		})
	}
}

func TestAddAndString(t *testing.T) {
	c := Count{Workflows: 1, Activities: 2, Heartbeats: 3}.Add(Count{Workflows: 2, Upserts: 1})
	if c.Billable() != 9 {
		t.Fatalf("Billable = %d, want 9", c.Billable())
	}
	if got, want := c.String(), "9 actions, 3 workflows, 2 activities, 3 heartbeats, 1 search-attribute upserts"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}
