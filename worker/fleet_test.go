package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/placement"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
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
	t.Cleanup(func() { cancel(); forgetWorkers(t, f.WorkerID) })
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

// A real worker process over its quota (1 MiB, the least it accepts)
// evicts the mirror of a repository another live worker owns before its
// own, though its own was used longer ago, and keeps its own once under the
// quota; its heartbeat then counts what is left. Failed before: eviction
// went by last use alone and removed both (the worker's own first, which
// left the other's copy over the quota).
func TestWorkerQuotaEvictsOthersFirst(t *testing.T) {
	ctx := context.Background()
	fg := startForge(t)
	const self, other = "quota-self", "quota-other"
	if err := env.Store.RegisterWorker(ctx, other, workflows.TaskQueue); err != nil {
		t.Fatal(err)
	}
	// The other worker stays live for as long as the test runs.
	beatCtx, stopBeat := context.WithCancel(ctx)
	// After the worker is killed (cleanups run last first), its row and
	// the other's go: the next tests' Git work would wait on their queues.
	t.Cleanup(func() { stopBeat(); forgetWorkers(t, self, other) })
	go func() {
		tick := time.NewTicker(fleetHeartbeat)
		defer tick.Stop()
		for {
			select {
			case <-beatCtx.Done():
				return
			case <-tick.C:
				_ = env.Store.HeartbeatWorker(beatCtx, other, 0, 0)
			}
		}
	}()
	live, err := env.Store.LiveWorkers(ctx, workflows.TaskQueue, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	live = append(live, self)
	// One repository this worker will own, one the other owns.
	var mine, others string
	for i := 0; mine == "" || others == ""; i++ {
		u := fg.CloneURL("acme", fmt.Sprintf("repo-%d", i))
		switch placement.Owner(placement.URLKey(u), live) {
		case self:
			if mine == "" {
				mine = fmt.Sprintf("repo-%d", i)
			}
		case other:
			if others == "" {
				others = fmt.Sprintf("repo-%d", i)
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "mirrors")
	m, err := mirror.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 3<<19) // 1.5 MiB that no compression shrinks
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{mine: "small\n", others: string(noise)} {
		if _, err := fg.CreateRepo("acme", name); err != nil {
			t.Fatal(err)
		}
		if _, err := fg.Commit("acme", name, "main", map[string]string{"f": content}, "add"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Sync(ctx, fg.CloneURL("acme", name)); err != nil {
			t.Fatal(err)
		}
	}
	// Its own used 2 hours ago, the other's 20 minutes ago: by last use
	// alone its own would go first.
	for name, ago := range map[string]time.Duration{mine: 2 * time.Hour, others: 20 * time.Minute} {
		at := time.Now().Add(-ago)
		if err := os.Chtimes(m.Path(fg.CloneURL("acme", name))+".used", at, at); err != nil {
			t.Fatal(err)
		}
	}
	w := startWorker(t, config.EnvMirrorDir+"="+dir, config.EnvWorkerID+"="+self, config.EnvMirrorQuota+"=1MiB")
	w.waitLine(t, "mirrors evicted over the quota")
	if _, err := os.Stat(m.Path(fg.CloneURL("acme", others))); !os.IsNotExist(err) {
		t.Fatalf("the other worker's mirror is still there: %v", err)
	}
	if _, err := os.Stat(m.Path(fg.CloneURL("acme", mine))); err != nil {
		t.Fatalf("its own mirror was evicted: %v", err)
	}
	// The heartbeat carries the count: one mirror, under the quota.
	poll.Until(t, "the worker's heartbeat counts 1 mirror under 1 MiB", 2*time.Minute, func() (bool, string) {
		ws, err := env.Store.Workers(ctx)
		if err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(ws, func(w store.Worker) bool { return w.ID == self })
		if i < 0 {
			return false, "no row"
		}
		return ws[i].Mirrors == 1 && ws[i].MirrorBytes > 0 && ws[i].MirrorBytes <= 1<<20, fmt.Sprintf("%+v", ws[i])
	})
}

// forgetWorkers deletes the workers rows of ids: a test's worker left
// registered looks live to the next tests' workers for their offline
// bound, and places Git work on a queue nobody polls.
func forgetWorkers(t *testing.T, ids ...string) {
	for _, id := range ids {
		if _, err := env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id = $1`, id); err != nil {
			t.Errorf("forget worker %s: %v", id, err)
		}
	}
}
