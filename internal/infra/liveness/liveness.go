// Package liveness tells a long network operation that is moving from one
// that hangs. A Meter rides in the operation's context; the transports that
// carry its bytes count them and mark the time they spend waiting on the
// remote. An activity heartbeats only while its operation moves, and gives
// it up once the remote has sent nothing for a bound (Watch): a hung fetch
// is then found within that bound instead of the activity's
// start-to-close timeout, and the retry goes to a fresh connection.
package liveness

import (
	"context"
	"sync/atomic"
	"time"
)

// A Meter counts an operation's received bytes and its waits on a remote.
// The zero value is ready; a nil *Meter counts nothing.
type Meter struct {
	bytes   atomic.Int64
	waiting atomic.Int64 // reads and requests in flight on a remote
}

type key struct{}

// With returns ctx carrying m.
func With(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, key{}, m)
}

// From returns the Meter ctx carries, or nil.
func From(ctx context.Context) *Meter {
	m, _ := ctx.Value(key{}).(*Meter)
	return m
}

// Received counts n bytes from a remote.
func (m *Meter) Received(n int) {
	if m != nil && n > 0 {
		m.bytes.Add(int64(n))
	}
}

// Wait marks a wait on a remote (a request until its answer's headers, a
// read of its body); done ends it.
func (m *Meter) Wait() (done func()) {
	if m == nil {
		return func() {}
	}
	m.waiting.Add(1)
	return func() { m.waiting.Add(-1) }
}

// Bytes is the count received so far.
func (m *Meter) Bytes() int64 { return m.bytes.Load() }

// Stalled reports whether the operation waits on a remote without a byte
// since last (the count at the previous look): work that waits on nothing
// remote (indexing a received pack, building an image) is not a stall.
func (m *Meter) stalled(last int64) bool {
	return m.waiting.Load() > 0 && m.bytes.Load() == last
}

// Bounds says how often a watched operation reports and how long its
// remote may stay silent.
type Bounds struct {
	Every time.Duration // between heartbeats (default 5 s)
	Stall time.Duration // silence that gives the operation up (default 45 s)
}

// Defaults for a Git activity with a one-minute heartbeat timeout: a
// stalled remote is given up before Temporal gives up the attempt.
const (
	DefaultEvery = 5 * time.Second
	DefaultStall = 45 * time.Second
)

func (b Bounds) withDefaults() Bounds {
	if b.Every <= 0 {
		b.Every = DefaultEvery
	}
	if b.Stall <= 0 {
		b.Stall = DefaultStall
	}
	if b.Every > b.Stall {
		b.Every = b.Stall
	}
	return b
}

// A StallError says a remote sent nothing for a while.
type StallError struct{ Silent time.Duration }

func (e *StallError) Error() string {
	return "the remote sent nothing for " + e.Silent.Round(time.Second).String() + ": connection given up"
}

// Watch runs an operation's context with a Meter: every b.Every it calls
// beat while the operation moves (bytes arrived since the last look, or it
// waits on nothing remote), and once the operation has waited on a silent
// remote for b.Stall it cancels the returned context with a *StallError
// as its cause (context.Cause). stop ends the watch.
func Watch(ctx context.Context, b Bounds, beat func()) (_ context.Context, stop func()) {
	b = b.withDefaults()
	m := &Meter{}
	ctx, cancel := context.WithCancelCause(With(ctx, m))
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(b.Every)
		defer t.Stop()
		last, silent := m.Bytes(), time.Duration(0)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if m.stalled(last) {
				if silent += b.Every; silent >= b.Stall {
					cancel(&StallError{Silent: silent})
					return
				}
				continue
			}
			last, silent = m.Bytes(), 0
			beat()
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}
