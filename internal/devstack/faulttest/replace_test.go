package faulttest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/config"
	"gitfleet/workflows"
)

// A worker paused mid-scan (SIGSTOP: a VM paused, a long GC pause) while
// its scan is placed again on another worker: the scan placed again takes
// the shard over with a new fence at its first attempt, finishes with the
// whole scan counted, and the paused worker, resumed, cannot write.
func TestScanPlacedAgainFencesThePausedOwner(t *testing.T) {
	for _, w := range liveWorkersExcept(nil) {
		w.kill()
	}
	ctx := context.Background()
	// Only this test's workers are in the fleet.
	if _, err := env.Store.Pool().Exec(ctx, `DELETE FROM workers`); err != nil {
		t.Fatal(err)
	}
	fleet := func(id string) []string {
		return []string{config.EnvWorkerID + "=" + id, config.EnvWorkerOffline + "=10s"}
	}
	first := startWorker(t, fleet("paused")...)
	dirs, info := bigRepo(t, 1)
	tg := targetOf(t, dirs[0])
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.ShardWorkflowID(tg.Key()), TaskQueue: workflows.TaskQueue},
		workflows.ExecuteShard, workflows.ExecuteShardInput{
			Spec:  shard.Spec{Key: tg.Key(), Target: target.Target{Location: tg.Location, Local: true, Selection: tg.Selection}},
			Place: workflows.GitPlace{Wait: 15 * time.Second},
		})
	if err != nil {
		t.Fatal(err)
	}
	waitMidScan(t, tg.Key())
	first.signal(syscall.SIGSTOP)
	stoppedAt := len(first.logs())
	sh, err := env.Store.ShardByKey(ctx, tg.Key())
	if err != nil {
		t.Fatal(err)
	}
	paused := sh.Fence
	// The next worker: the scan's retry waits on the paused worker's queue
	// past the placement bound, by then the paused worker is offline, and
	// the scan is placed here.
	next := startWorker(t, fleet("next")...)
	var res workflows.ExecuteShardResult
	if err := run.Get(ctxTimeout(t, 3*time.Minute), &res); err != nil {
		// The paused worker may hold the shard row in a transaction: let
		// it finish that one write.
		first.signal(syscall.SIGCONT)
		res = result(t, run, 2*time.Minute)
	}
	first.signal(syscall.SIGCONT)
	// Its attempt meets the new fence (its lease keeper or a batch write)
	// and stops: after that it cannot write, so the database is final.
	first.waitLog(t, stoppedAt, "scan stopped", 2*time.Minute)
	if res.Status != shard.Done || res.Receipt == nil {
		t.Fatalf("scan placed again: %+v\nnext worker's log:\n%s", res, tail(next.logs(), 4000))
	}
	if res.Receipt.Fence <= paused || res.Owners != 1 {
		t.Fatalf("receipt of fence %d after %d claims; the paused owner held %d: the scan placed again did not take the shard over",
			res.Receipt.Fence, res.Owners, paused)
	}
	var late int
	if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM shard_receipts WHERE shard_id = $1 AND fence = $2`,
		sh.ID, paused).Scan(&late); err != nil || late != 0 {
		t.Fatalf("%d receipts under the paused owner's fence (%v)", late, err)
	}
	if got := res.Receipt.BlobsScanned + res.Receipt.BlobsSkipped; got != int64(info.Blobs) {
		t.Fatalf("the receipt counts %d blobs, the repository has %d: the paused owner's batches are lost", got, info.Blobs)
	}
	if seen, receipts := seenBlobs(t, tg.Key()); seen != info.Blobs || receipts != 1 {
		t.Fatalf("%d seen blobs, %d receipts; want %d and 1", seen, receipts, info.Blobs)
	}
	tally, err := env.Store.RunTally(ctx, sh.ID)
	if err != nil || tally.Scanned != res.Receipt.BlobsScanned || tally.Skipped != res.Receipt.BlobsSkipped {
		t.Fatalf("the run's tally after the paused owner resumed: %+v, %v; want the receipt's", tally, err)
	}
}
