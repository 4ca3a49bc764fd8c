package activities

import (
	"context"
	"errors"
	"testing"

	"gitfleet/internal/infra/errclass"
)

// Only a lease taken over ends an attempt as StaleOwner; Temporal ending
// it (the SDK cancels with its heartbeat's error when the attempt timed
// out while the worker was stopped) or a plain cancel is an interruption.
func TestLeaseLost(t *testing.T) {
	stale := errclass.StaleOwnerf("shard 4: fence 2 was superseded by fence 3")
	for _, tc := range []struct {
		name  string
		cause error
		want  error
	}{
		{"taken over", stale, stale},
		{"timed out while stopped", errors.New("invalid activityID or activity already timed out or invoking workflow is completed"), nil},
		{"cancelled", nil, nil},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(tc.cause)
		if got := leaseLost(ctx); got != tc.want {
			t.Errorf("%s: leaseLost = %v, want %v", tc.name, got, tc.want)
		}
	}
	if leaseLost(context.Background()) != nil {
		t.Error("a live context's lease is lost")
	}
}
