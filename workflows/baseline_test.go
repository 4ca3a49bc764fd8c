package workflows

import (
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"gitfleet/workflows/versioning"
)

// A successor baseline can be declared: every recorded history of Collect
// and ExecuteShard replays with a next baseline prepended to the workflow's
// line, as the next release would declare it. Replacing the baseline
// instead (all the old scheme allowed) breaks the histories recorded under
// it, which is why a line only grows at its head.
func TestSuccessorBaselineKeepsReplay(t *testing.T) {
	for _, wf := range []struct {
		name     string
		line     versioning.Line
		register func(worker.WorkflowReplayer, versioning.Line)
	}{
		{"Collect", collectBaselines, func(r worker.WorkflowReplayer, l versioning.Line) {
			r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in CollectInput) (CollectResult, error) {
				return collectUnder(l.Apply(ctx), in)
			}, workflow.RegisterOptions{Name: "Collect"})
		}},
		{"ExecuteShard", shardBaselines, func(r worker.WorkflowReplayer, l versioning.Line) {
			r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ExecuteShardInput) (ExecuteShardResult, error) {
				return executeShardUnder(l.Apply(ctx), in)
			}, workflow.RegisterOptions{Name: "ExecuteShard"})
		}},
	} {
		t.Run(wf.name, func(t *testing.T) {
			next := versioning.Baseline{ID: wf.name + "-baseline-next", Changes: maps.Clone(wf.line[0].Changes)}
			files := historiesOf(t, wf.name)
			if len(files) == 0 {
				t.Fatalf("no recorded history of %s", wf.name)
			}
			replays := func(l versioning.Line, f string) error {
				r := worker.NewWorkflowReplayer()
				wf.register(r, l)
				return r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), f)
			}
			replaced := 0
			for _, f := range files {
				if err := replays(append(versioning.Line{next}, wf.line...), f); err != nil {
					t.Errorf("%s does not replay after a successor baseline: %v", filepath.Base(f), err)
				}
				if replays(versioning.Line{next}, f) != nil {
					replaced++
				}
			}
			if replaced == 0 {
				t.Errorf("no history of %s fails when its baseline is replaced: none is recorded under it", wf.name)
			}
		})
	}
}

// historiesOf lists the recorded histories of workflow type wf.
func historiesOf(t *testing.T, wf string) []string {
	all, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range all {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var h historypb.History
		if err := protojson.Unmarshal(data, &h); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName() == wf {
			files = append(files, f)
		}
	}
	return files
}
