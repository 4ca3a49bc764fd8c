package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/workflows"
)

// A scan that parks its shard ends its run failed, non-retryable, with
// the reason as its message, so `temporal workflow list` and the Web UI
// show it failed; the result is in the failure's details, and the
// outcome in GitfleetOutcome as before. The queries docs/architecture.md
// gives find it.
func TestParkedScanFailsItsRunWithTheReason(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	createRepo(t, o, "hidden", "a.txt")
	if err := fg.SetPrivate(o, "hidden", true); err != nil {
		t.Fatal(err)
	}
	tg := normalized(t, target.Request{Location: fg.CloneURL(o, "hidden")})[0]
	run := startScan(t, tg, 0)
	var res workflows.ExecuteShardResult
	err := run.Get(ctxTimeout(t, 3*time.Minute), &res)
	parked, ok := workflows.ParkedResult(err)
	if !ok || parked.Status != shard.Parked || parked.ParkReason != errclass.ReasonPermissionDenied {
		t.Fatalf("scan of a private repository: %v (%+v)", err, parked)
	}
	recordHistory(t, "execute-shard-parked", run.GetID(), run.GetRunID())
	d, err := env.Client.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		t.Fatalf("the parked scan's run is %s, want Failed", st)
	}
	want := fmt.Sprintf("shard %d parked: %s", parked.ShardID, errclass.ReasonPermissionDenied)
	if msg := closeFailure(t, run.GetID(), run.GetRunID()); msg != want {
		t.Fatalf("the run's failure says %q, want %q", msg, want)
	}
	// The documented queries (docs/architecture.md §3) list and count it.
	for _, q := range []string{
		fmt.Sprintf(`WorkflowId = %q AND GitfleetOutcome = "parked"`, run.GetID()),
		fmt.Sprintf(`WorkflowId = %q AND WorkflowType = "ExecuteShard" AND ExecutionStatus = "Failed"`, run.GetID()),
	} {
		poll.Until(t, "visibility lists the parked scan for "+q, time.Minute, func() (bool, string) {
			l, err := env.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q})
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return len(l.GetExecutions()) == 1, fmt.Sprint(len(l.GetExecutions()), " runs")
		})
	}
	c, err := env.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`WorkflowId = %q GROUP BY ExecutionStatus`, run.GetID())})
	if err != nil || c.GetCount() != 1 {
		t.Fatalf("count grouped by ExecutionStatus: %v, %v", c, err)
	}
	if _, err := env.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "GROUP BY GitfleetOutcome"}); err == nil {
		t.Fatal("Temporal now groups by GitfleetOutcome: say so in docs/architecture.md")
	}
}

// closeFailure is the message a failed run closed with.
func closeFailure(t *testing.T, id, runID string) string {
	t.Helper()
	it := env.Client.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetWorkflowExecutionFailedEventAttributes(); a != nil {
			return a.GetFailure().GetMessage()
		}
	}
	t.Fatalf("%s did not fail", id)
	return ""
}
