package liveness

import (
	"context"
	"errors"
	"sync/atomic"
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
		var beats atomic.Int64
		// A stall bound far above the beats: a slow machine does not stall.
		ctx, stop := Watch(context.Background(), Bounds{Every: 5 * time.Millisecond, Stall: time.Second}, func() { beats.Add(1) })
		m := From(ctx)
		done := m.Wait()
		// Bytes keep arriving, a millisecond apart (the traffic, not a wait
		// for an outcome), for 20 beats: never stalled, as the stall bound
		// is 200 beats.
		for beats.Load() < 20 && ctx.Err() == nil {
			m.Received(1)
			time.Sleep(time.Millisecond)
		}
		done()
		// Not waiting on the remote (indexing, say): alive without bytes,
		// past the stall bound.
		for n := beats.Load(); beats.Load() < n+250 && ctx.Err() == nil; {
			time.Sleep(time.Millisecond) // spaces the looks; not waiting on the remote, it can never stall
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
