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

// A stopping worker leaves: it is out of the live set at once, though its
// last heartbeat is fresh, and a heartbeat or a registration under its id
// (a process polling its queue again) brings it back. Workers silent for
// longer than the bound — left or dead — are forgotten; the others stay.
func TestWorkerLeavesAndIsForgotten(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	live := func() []string {
		t.Helper()
		ids, err := env.Store.LiveWorkers(ctx, "gitfleet", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return f.own(ids)
	}
	silent := func(name string, ago time.Duration) {
		t.Helper()
		if _, err := env.Store.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now() - $2 * interval '1 second' WHERE id = $1`,
			f.id(name), ago.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := env.Store.RegisterWorker(ctx, f.id(name), "gitfleet"); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Store.LeaveWorker(ctx, f.id("a")); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.LeaveWorker(ctx, f.id("b")); err != nil {
		t.Fatal(err)
	}
	if got := live(); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("live = %v, want c and d (a and b left a moment ago)", got)
	}
	all, err := env.Store.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range all {
		if name := f.own([]string{w.ID}); len(name) == 1 {
			if left := name[0] == "a" || name[0] == "b"; left != !w.Left.IsZero() {
				t.Errorf("worker %s: left at %v, want left %v", name[0], w.Left, left)
			}
		}
	}
	if err := env.Store.HeartbeatWorker(ctx, f.id("a"), 0, 0); err != nil { // another process under a's id
		t.Fatal(err)
	}
	if err := env.Store.RegisterWorker(ctx, f.id("b"), "gitfleet"); err != nil { // b restarted
		t.Fatal(err)
	}
	if got := live(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("live = %v, want all four back", got)
	}

	if err := env.Store.LeaveWorker(ctx, f.id("a")); err != nil {
		t.Fatal(err)
	}
	silent("a", 25*time.Hour) // left a day ago
	silent("b", 25*time.Hour) // died a day ago
	silent("c", 23*time.Hour) // silent, not for a day yet
	forgotten, err := env.Store.ForgetWorkers(ctx, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.own(forgotten); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("forgotten = %v, want a and b", got)
	}
	all, err = env.Store.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, w := range all {
		left = append(left, w.ID)
	}
	if got := f.own(left); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("rows left = %v, want c and d", got)
	}
	if err := env.Store.HeartbeatWorker(ctx, f.id("a"), 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("heartbeat of a forgotten worker = %v, want not found (it registers again)", err)
	}
}
