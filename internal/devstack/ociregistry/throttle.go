package ociregistry

import (
	"context"
	"sync"
	"time"
)

// bucket is a token bucket expressed as a schedule: at is the time by which
// everything granted so far has been paid for. Waiting until an absolute
// time (rather than sleeping n/rate per call) makes late wake-ups self
// correcting, which is what keeps the rate accurate at tens of MB/s.
type bucket struct {
	rate  float64       // bytes per second
	burst time.Duration // credit an idle bucket may accumulate

	mu sync.Mutex
	at time.Time
}

func newBucket(bytesPerSecond int64) *bucket {
	return &bucket{rate: float64(bytesPerSecond), burst: 20 * time.Millisecond}
}

// wait blocks until n more bytes may be sent.
func (b *bucket) wait(ctx context.Context, n int) error {
	b.mu.Lock()
	now := time.Now()
	if floor := now.Add(-b.burst); b.at.Before(floor) {
		b.at = floor
	}
	b.at = b.at.Add(time.Duration(float64(n) / b.rate * float64(time.Second)))
	d := b.at.Sub(now)
	b.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
