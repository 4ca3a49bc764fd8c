package unittest

import (
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"gitfleet/internal/infra/logging"
	"gitfleet/workflows"
)

// Replay guards determinism: every history recorded in
// workflows/testdata/histories must replay against the current workflow
// code. A change that breaks one needs workflow.GetVersion, not a
// re-recording.
//
// To record new histories (for a new workflow or a new branch of one), run
// package workflows' integration tests with GITFLEET_RECORD_HISTORIES=1:
// tests that call recordHistory write their run's history there.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in workflows/testdata/histories")
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
