package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// cleanupRetention is the test worker's retention: the defaults a worker
// has. The tests' rows are recent; the cleanup tests age theirs.
var cleanupRetention = store.Retention(config.DefaultRetention)

// The daily cleanup deletes a stale codebase with everything its scans
// wrote, and a scan request's results unused past retention, in rounds
// that each stop at their budget: a round of one step here, so it takes
// several, each resuming where the last stopped.
func TestCleanupStaleInRoundsWithRetention(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	createRepo(t, o, "app", "a.txt")
	res := mustCollect(t, id(o, "app"), identity.CaseNew)
	key := fmt.Sprintf("codebase:%d", res.CodebaseID)
	sh, err := env.Store.ShardByKey(ctx, key)
	if err != nil || sh == nil {
		t.Fatalf("the collection's shard: %v, %v", sh, err)
	}
	if err := env.Store.MarkStale(ctx, res.CodebaseID, time.Now().Add(-31*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	scan, err := env.Store.EnsureShard(ctx, shard.Spec{Key: "target:" + o, Target: target.Target{Location: "https://h/" + o}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Scope(ctx, scan, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE shards SET updated_at = now() - interval '100 days' WHERE id = $1`, scan); err != nil {
		t.Fatal(err)
	}

	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue},
		workflows.CleanupStale, workflows.CleanupStaleInput{Budget: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.CleanupStaleResult
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Deleted < 1 || out.Removed.Shards < 2 || out.Removed.Scopes < 2 || out.Removed.Rows < 1 || out.Rounds < 4 || out.Removed.More {
		t.Fatalf("cleanup = %+v, want the codebase, both shards, their scopes and rows, in several rounds", out)
	}
	for _, id := range []int64{sh.ID, scan} {
		if s, err := env.Store.ShardByID(ctx, id); err != nil || s != nil {
			t.Errorf("shard %d: %+v, %v; want deleted", id, s, err)
		}
	}
	var left int
	if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM scan_scopes WHERE shard_id = ANY($1)`,
		[]int64{sh.ID, scan}).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d scopes of the deleted shards left, %v", left, err)
	}
	recordHistory(t, "cleanup-stale-rounds", run.GetID(), run.GetRunID())
}
