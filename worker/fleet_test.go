package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// beats passes the real store's heartbeats on to the test.
type beats struct {
	fleetStore
	beat chan [2]int64
}

func (b beats) HeartbeatWorker(ctx context.Context, id string, mirrors, bytes int64) error {
	err := b.fleetStore.HeartbeatWorker(ctx, id, mirrors, bytes)
	b.beat <- [2]int64{mirrors, bytes}
	return err
}

// The heartbeat never waits for the mirrors' upkeep: with the upkeep stuck
// (a quota pass over a slow disk), every tick still heartbeats, with the
// upkeep's last count; once it runs, the heartbeat carries its count.
// Failed before: the quota and the count ran on the heartbeat's goroutine,
// so a stuck pass (an eviction waiting for a mirror's lock while a sync
// fetched into it) stopped the heartbeats and the worker went offline.
func TestHeartbeatDoesNotWaitForUpkeep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := t.TempDir()
	mirrors, err := mirror.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := beats{env.Store, make(chan [2]int64)}
	f := config.Fleet{WorkerID: "heartbeat-upkeep", WorkerOffline: time.Minute}
	if err := st.RegisterWorker(ctx, f.WorkerID, workflows.TaskQueue); err != nil {
		t.Fatal(err)
	}
	fl := newFleet(st, f, mirrors, zap.NewNop())
	stuck, entered := make(chan struct{}), make(chan struct{}, 1)
	fl.upkeepOnce = func(ctx context.Context) {
		entered <- struct{}{}
		select {
		case <-stuck:
		case <-ctx.Done():
		}
		fl.upkeep(ctx)
	}
	beatTick, upkeepTick := make(chan time.Time), make(chan time.Time)
	go fl.upkeepLoop(ctx, upkeepTick)
	<-entered // the upkeep is stuck from now on
	go fl.heartbeatLoop(ctx, beatTick)
	next := func() [2]int64 {
		t.Helper()
		select {
		case b := <-st.beat:
			return b
		case <-time.After(2 * time.Minute): // a bound for a regression only
			t.Fatal("no heartbeat while the upkeep is stuck")
			return [2]int64{}
		}
	}
	for i := range 3 {
		if i > 0 {
			beatTick <- time.Now()
		}
		if b := next(); b != [2]int64{0, 0} {
			t.Fatalf("heartbeat %d = %v before any count", i, b)
		}
	}
	ws, err := env.Store.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == f.WorkerID && w.Silent > 30*time.Second {
			t.Fatalf("worker silent %v", w.Silent)
		}
	}
	// The upkeep runs: the next heartbeat carries its count (a mirror of
	// 3 bytes, of an earlier release: no sidecar).
	path := filepath.Join(root, "0123456789abcdef0123456789abcdef.git")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "HEAD"), []byte("ref"), 0o644); err != nil {
		t.Fatal(err)
	}
	close(stuck)
	upkeepTick <- time.Now() // taken once the first pass is done
	beatTick <- time.Now()
	if b := next(); b != [2]int64{1, 3} {
		t.Fatalf("heartbeat after the upkeep = %v, want 1 mirror of 3 bytes", b)
	}
}
