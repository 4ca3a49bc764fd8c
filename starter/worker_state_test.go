package main

import (
	"testing"
	"time"

	"gitfleet/internal/domain/placement"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/store"
)

// `worker list` says what a worker's row means now: a stopped worker is
// "left" whatever its heartbeat, a silent one "offline", else its state.
func TestWorkerState(t *testing.T) {
	a := &app{cfg: config.Config{Fleet: config.Fleet{WorkerOffline: time.Minute}}}
	for _, tc := range []struct {
		w    store.Worker
		want string
	}{
		{store.Worker{State: placement.Active, Silent: time.Second}, "active"},
		{store.Worker{State: placement.Draining, Silent: time.Second}, "draining"},
		{store.Worker{State: placement.Active, Silent: 2 * time.Minute}, "offline"},
		{store.Worker{State: placement.Active, Silent: time.Second, Left: time.Now()}, "left"},
		{store.Worker{State: placement.Draining, Silent: time.Hour, Left: time.Now().Add(-time.Hour)}, "left"},
	} {
		if got := a.workerState(tc.w); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.w, got, tc.want)
		}
	}
}
