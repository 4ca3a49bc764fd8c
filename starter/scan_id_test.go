package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"
)

// Two bare repositories of one base name scan under ids that name their
// paths (before, both were scan:repo:<digest>); a scan an older starter
// started under the base-name id and that still runs is joined, not run a
// second time beside it.
func TestLocalScanIDsNameThePathAndJoinALegacyRun(t *testing.T) {
	base := t.TempDir()
	var ids []string
	for _, team := range []string{"a", "b"} {
		work, git := gitRepo(t)
		if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("hi "+team+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", ".")
		git("commit", "-q", "-m", "init")
		bare := filepath.Join(base, team, "repo")
		git("clone", "-q", "--bare", work, bare)
		out, errOut, code := starter(t, "scan", bare)
		if code != 0 {
			t.Fatalf("scan %s: exit %d\n%s%s", bare, code, out, errOut)
		}
		id := workflowOf(out)
		if !strings.HasPrefix(id, "scan:"+bare+":") {
			t.Fatalf("scan %s ran as %q, want scan:%s:<digest>", bare, id, bare)
		}
		ids = append(ids, id)
	}
	if ids[0] == ids[1] {
		t.Fatalf("two repositories share the id %s", ids[0])
	}

	// A run under the legacy id, still running (its first task is due in an
	// hour): the starter joins it.
	sel := selectionFlags{refs: []string{"main"}}
	n, err := sel.normalize([]string{filepath.Join(base, "a", "repo")})
	if err != nil {
		t.Fatal(err)
	}
	tgt := n.Targets[0]
	legacy := workflows.LegacyScanWorkflowID(tgt)
	ctx := context.Background()
	if _, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: legacy, TaskQueue: workflows.TaskQueue, StartDelay: time.Hour},
		workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: tgt.Key(), Target: tgt}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := starter(t, "scan", "--no-wait", "--ref", "main", tgt.Location)
	if code != 0 || workflowOf(out) != legacy {
		t.Fatalf("scan while a legacy run is running: exit %d, ran as %q, want to join %s\n%s%s", code, workflowOf(out), legacy, out, errOut)
	}
	if err := env.Client.TerminateWorkflow(ctx, legacy, "", "test done"); err != nil {
		t.Fatal(err)
	}
	// Once it is over, the scan runs under its own id.
	out, errOut, code = starter(t, "scan", "--ref", "main", tgt.Location)
	if code != 0 || workflowOf(out) != workflows.ScanWorkflowID(tgt) || workflowOf(out) == legacy {
		t.Fatalf("scan after the legacy run: exit %d, ran as %q, want %s\n%s%s", code, workflowOf(out), workflows.ScanWorkflowID(tgt), out, errOut)
	}
}

// workflowOf is the id on the "workflow" line of a command's output.
func workflowOf(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "workflow" {
			return f[1]
		}
	}
	return ""
}
