package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"gitfleet/internal/domain/placement"
	"gitfleet/internal/infra/store"
)

// Workers register, heartbeat with their mirrors, drain and come back;
// the live ones are the active ones heard of within the bound, by the
// database's clock, and a restart does not undo a drain.
func TestWorkerLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	beat := func(name string, ago time.Duration) {
		t.Helper()
		if _, err := env.Store.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now() - $2 * interval '1 second' WHERE id = $1`,
			f.id(name), ago.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	live := func(fresh time.Duration) []string {
		t.Helper()
		ids, err := env.Store.LiveWorkers(ctx, "gitfleet", fresh)
		if err != nil {
			t.Fatal(err)
		}
		return f.own(ids)
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := env.Store.RegisterWorker(ctx, f.id(name), "gitfleet"); err != nil {
			t.Fatal(err)
		}
	}
	// Another deployment's worker, on another queue, owns nothing here.
	if err := env.Store.RegisterWorker(ctx, f.id("elsewhere"), "other"); err != nil {
		t.Fatal(err)
	}
	beat("c", 5*time.Minute)
	if got := live(time.Minute); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("live = %v, want a and b (c silent 5 minutes)", got)
	}
	if err := env.Store.HeartbeatWorker(ctx, f.id("c"), 3, 4096); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.SetWorkerState(ctx, f.id("a"), placement.Draining); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.RegisterWorker(ctx, f.id("a"), "gitfleet"); err != nil { // a restart
		t.Fatal(err)
	}
	if got := live(time.Minute); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("live = %v, want b and c (a draining, through its restart)", got)
	}
	all, err := env.Store.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var c store.Worker
	for _, w := range all {
		if w.ID == f.id("c") {
			c = w
		}
	}
	if c.Mirrors != 3 || c.MirrorBytes != 4096 || c.State != placement.Active || c.Silent > time.Minute {
		t.Fatalf("worker c = %+v, want 3 mirrors of 4096 bytes, active, just heard of", c)
	}
	if err := env.Store.SetWorkerState(ctx, f.id("a"), placement.Active); err != nil {
		t.Fatal(err)
	}
	if got := live(time.Minute); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("live after resume = %v", got)
	}
	if err := env.Store.HeartbeatWorker(ctx, f.id("nobody"), 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("heartbeat of an unknown worker = %v, want not found", err)
	}
	if err := env.Store.RegisterWorker(ctx, "bad id!", "gitfleet"); err == nil {
		t.Fatal("a worker id with a space and '!' was registered")
	}
}
