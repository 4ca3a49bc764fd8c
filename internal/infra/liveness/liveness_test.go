package liveness

import (
	"context"
	"errors"
	"testing"
	"time"
)

var quick = Bounds{Every: 5 * time.Millisecond, Stall: 50 * time.Millisecond}

func TestWatch(t *testing.T) {
	t.Run("a silent remote is given up", func(t *testing.T) {
		ctx, stop := Watch(context.Background(), quick, func() {})
		defer stop()
		done := From(ctx).Wait()
		defer done()
		<-ctx.Done()
		var s *StallError
		if !errors.As(context.Cause(ctx), &s) || s.Silent < quick.Stall {
			t.Fatalf("cause %v; want a stall of at least %v", context.Cause(ctx), quick.Stall)
		}
	})
	t.Run("bytes keep it alive, and so does work that waits on nothing remote", func(t *testing.T) {
		beats := make(chan struct{}, 1)
		beat := func() {
			select {
			case beats <- struct{}{}:
			default: // the test has not taken the last one yet
			}
		}
		// A stall bound far above the beats: a slow machine does not stall.
		ctx, stop := Watch(context.Background(), Bounds{Every: 5 * time.Millisecond, Stall: time.Second}, beat)
		m := From(ctx)
		// Waiting on nothing yet, it beats: after a beat the watch has
		// read the byte count, so each byte below is news to its next look.
		waitBeat(t, ctx, beats)
		done := m.Wait()
		// A byte arrives at every beat, for 20 beats: never stalled, as the
		// stall bound is 200 beats.
		for range 20 {
			m.Received(1)
			waitBeat(t, ctx, beats)
		}
		done()
		// Not waiting on the remote (indexing, say): alive without bytes,
		// for 250 beats, past the stall bound.
		for range 250 {
			waitBeat(t, ctx, beats)
		}
		stop()
		if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("cause after stop = %v; want plain cancellation", err)
		}
	})
	t.Run("a nil meter counts nothing", func(t *testing.T) {
		var m *Meter
		m.Received(3)
		m.Wait()()
		if From(context.Background()) != nil {
			t.Fatal("a context without a meter has one")
		}
	})
}

// waitBeat waits for the watch's next heartbeat; a watch that ended (it
// took the remote for stalled) fails the test.
func waitBeat(t *testing.T, ctx context.Context, beats <-chan struct{}) {
	t.Helper()
	select {
	case <-beats:
	case <-ctx.Done():
		t.Fatalf("the watch ended: %v", context.Cause(ctx))
	}
}
