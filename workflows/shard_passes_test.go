package workflows_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/workflows"
)

// A run given no budget (as Collect gives none) scans in passes: each
// attempt stops at the worker's budget with what it did durable, and the
// next pass of the same run continues from there, each blob scanned once,
// until the shard is Done. (A worker of its own, whose budget is spent as
// soon as a pass has read something new.)
func TestScanContinuesInPasses(t *testing.T) {
	const queue = "gitfleet-passes"
	scanner, err := activities.NewScanner("", testFindingKey)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivity(&activities.Shards{Store: env.Store, Scanner: scanner, BatchBlobs: 20, LeaseFor: 6 * time.Second,
			Budget: time.Nanosecond})
		w.RegisterActivity(&activities.Activities{Store: env.Store}) // PlaceGitWork
	}, workflows.GitTaskQueue(queue))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	dir := filepath.Join(t.TempDir(), "repo.git")
	info, err := repogen.Generate(dir, repogen.Spec{Commits: 20, FilesPerCommit: 3, Refs: 3, BlobSize: 200, Seed: 41,
		Secrets: []repogen.Secret{{Commit: 15, Path: "conf/app.env", Content: "TOKEN=" + ghToken + "\n"}}})
	if err != nil {
		t.Fatal(err)
	}
	tg := normalized(t, target.Request{Location: dir})[0]
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.ShardWorkflowID(tg.Key()), TaskQueue: queue,
	}, workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: tg.Key(), Target: tg}})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.ExecuteShardResult
	if err := run.Get(ctxTimeout(t, 3*time.Minute), &res); err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "execute-shard-passes", run.GetID(), run.GetRunID())
	if res.Status != shard.Done || res.Passes < 1 || res.Owners != res.Passes+1 || !res.Receipt.Complete {
		t.Fatalf("result %+v %+v; want Done after more than one pass", res, res.Receipt)
	}
	scope, err := env.Store.Scope(context.Background(), res.ShardID, scanner.Policy())
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM seen_blob_ids WHERE scope_id = $1`, scope).Scan(&seen); err != nil {
		t.Fatal(err)
	}
	if seen != info.Blobs || len(findings(t, tg.Key())) != 1 {
		t.Fatalf("%d blobs seen of %d, %d findings; want every blob and the secret", seen, info.Blobs, len(findings(t, tg.Key())))
	}
}
