package workflows_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// recordHistory writes a finished run's history to testdata/histories/name.json
// when GITFLEET_RECORD_HISTORIES is set; unittest.TestReplayRecordedHistories
// replays them.
func recordHistory(t *testing.T, name, workflowID, runID string) {
	t.Helper()
	if os.Getenv("GITFLEET_RECORD_HISTORIES") == "" {
		return
	}
	var h historypb.History
	it := env.Client.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join("testdata", "histories"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "histories", name+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstChildRun returns the run id of the first child a run started (a
// child that failed and was started again keeps its workflow id).
func firstChildRun(t *testing.T, workflowID, runID string) string {
	t.Helper()
	it := env.Client.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			return a.GetWorkflowExecution().GetRunId()
		}
	}
	t.Fatalf("%s started no child", workflowID)
	return ""
}
