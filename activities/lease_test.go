package activities_test

import (
	"context"
	"testing"
	"time"

	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/errclass"
	"gitfleet/workflows"
)

// Every activity of an owner may start after its lease ran out (it waited
// in the task queue) and goes on as long as nobody took the shard over
// meanwhile; once someone did, it stops at once.
func TestActivitiesStartAfterTheLeaseRanOut(t *testing.T) {
	s := shards(t, time.Minute, 20)
	dir, _ := generate(t, repogen.Spec{Commits: 30, FilesPerCommit: 3, BlobSize: 200, Seed: 21})
	spec, shardID := localShard(t, s, dir)
	l := lease(t, s, shardID, "queued")
	ctx := context.Background()

	expireLease(t, shardID)
	digest, err := s.SyncShardMirror(ctx, workflows.ShardWork{Lease: l, Spec: spec})
	if err != nil {
		t.Fatalf("mirror sync that started after the lease ran out: %q, %v", digest, err)
	}
	expireLease(t, shardID)
	r, err := s.ScanShard(ctx, workflows.ShardWork{Lease: l, Spec: spec})
	if err != nil || !r.Complete || r.Fence != l.Fence {
		t.Fatalf("scan that started after the lease ran out: %+v, %v", r, err)
	}
	expireLease(t, shardID)
	if st, err := s.CheckpointShard(ctx, workflows.CheckpointInput{Lease: l, ReceiptID: r.ID}); err != nil || st != shard.Done {
		t.Fatalf("checkpoint that started after the lease ran out: %s, %v", st, err)
	}

	// Someone took the shard over while the next attempt waited: it stops.
	other := newShardFor(t, s, dir+"/../taken")
	mine := lease(t, s, other, "queued")
	expireLease(t, other)
	lease(t, s, other, "someone else")
	if _, err := s.ScanShard(ctx, workflows.ShardWork{Lease: mine, Spec: spec}); !isClass(err, errclass.StaleOwner) {
		t.Fatalf("scan after a takeover: %v, want StaleOwner", err)
	}
	if _, err := s.SyncShardMirror(ctx, workflows.ShardWork{Lease: mine, Spec: spec}); !isClass(err, errclass.StaleOwner) {
		t.Fatalf("mirror sync after a takeover: %v, want StaleOwner", err)
	}
}

// A scan heartbeats on its progress, not after its lease renewals: with
// the shard row locked (a slow batch write, a stuck renewal) the scan's
// heartbeats go on, and it finishes once the database answers.
func TestHeartbeatsDoNotWaitForTheDatabase(t *testing.T) {
	s := shards(t, 300*time.Millisecond, 50)
	s.HeartbeatEvery = 10 * time.Millisecond
	dir, info := generate(t, repogen.Spec{Commits: 200, FilesPerCommit: 5, BlobSize: 300, Seed: 23})
	spec, shardID := localShard(t, s, dir)
	l := lease(t, s, shardID, "owner")

	beats := make(chan map[string]int64, 1000)
	s.Heartbeat = func(_ context.Context, p map[string]int64) {
		select {
		case beats <- p:
		default:
		}
	}
	done := make(chan error, 1)
	var r shard.Receipt
	go func() {
		var err error
		r, err = s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec})
		done <- err
	}()
	// The first batch is written...
	for p := <-beats; p["blobs"] == 0; p = <-beats {
	}
	// ...then the database holds the shard row: the next write and every
	// renewal wait for it.
	tx, err := env.Store.Pool().Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // released below
	if _, err := tx.Exec(context.Background(), `SELECT 1 FROM shards WHERE id = $1 FOR UPDATE`, shardID); err != nil {
		t.Fatal(err)
	}
	for len(beats) > 0 {
		<-beats
	}
	deadline := time.After(time.Minute) // a bound on failure only: the beats come every 10 ms
	for n := 0; n < 50; n++ {
		select {
		case <-beats:
		case err := <-done:
			t.Fatalf("the scan ended while the database held its row: %v", err)
		case <-deadline:
			t.Fatalf("%d heartbeats while the database held the shard row, then none", n)
		}
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || !r.Complete || r.BlobsScanned+r.BlobsSkipped != int64(info.Blobs) {
		t.Fatalf("scan after the database answered: %+v, %v", r, err)
	}
}
