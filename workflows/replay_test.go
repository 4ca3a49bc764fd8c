package workflows_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"gitfleet/internal/infra/logging"
	"gitfleet/workflows"
)

// Replay guards determinism: every history recorded in testdata/histories
// must replay against the current workflow code. A change that breaks one
// needs workflow.GetVersion, not a re-recording.
//
// To record new histories (for a new workflow or a new branch of one), run
// the integration tests with GITFLEET_RECORD_HISTORIES=1: tests that call
// recordHistory write their run's history there.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/histories")
	}
	seen := map[string]bool{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			workflows.Register(r)
			log, _ := logging.New("error", "console")
			if err := r.ReplayWorkflowHistoryFromJSONFile(logging.Temporal(log), f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
		seen[workflowTypeOf(t, f)] = true
	}
	for _, wf := range []string{"Collect", "ResolveIdentity", "CleanupStale", "ExecuteShard", "RecollectionSweep",
		"PropagateSnapshot", "RemoveSnapshot", "ReconcileRunners"} {
		if !seen[wf] {
			t.Errorf("no recorded history of %s", wf)
		}
	}
}

func workflowTypeOf(t *testing.T, file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var h historypb.History
	if err := protojson.Unmarshal(data, &h); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
}

// recordHistory writes a finished run's history to testdata/histories/name.json
// when GITFLEET_RECORD_HISTORIES is set.
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
