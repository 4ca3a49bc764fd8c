package unittest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
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
		"PropagateSnapshot", "RemoveSnapshot", "ReconcileRunners", "CollectOrg", "RecollectAccount", "UploadCodeScanning"} {
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

// Every baseline a workflow still declares has a recorded history under it,
// so that the path every new run takes, and every older run recorded under
// a baseline that a successor followed, is replayed. A baseline is retired
// (removed from its line) only as docs/architecture.md says, and its
// histories with it.
func TestEveryBaselineHasAHistory(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string][]string{} // workflow type → the change ids its histories have markers of
	for _, f := range files {
		wf := workflowTypeOf(t, f)
		recorded[wf] = append(recorded[wf], versionMarkers(t, f)...)
	}
	lines := workflows.Baselines()
	if len(lines) == 0 {
		t.Fatal("no workflow declares a baseline")
	}
	for wf, line := range lines {
		if len(line) == 0 {
			t.Errorf("%s has an empty line of baselines", wf)
		}
		for _, b := range line {
			if !slices.Contains(recorded[wf], b.ID) {
				t.Errorf("no recorded history of %s under its baseline %s", wf, b.ID)
			}
		}
	}
}

// versionMarkers are the change ids of a history's version markers.
func versionMarkers(t *testing.T, file string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var h historypb.History
	if err := protojson.Unmarshal(data, &h); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var ids []string
	for _, e := range h.GetEvents() {
		m := e.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("%s: event %d: %v", file, e.GetEventId(), err)
		}
		ids = append(ids, id)
	}
	return ids
}
