package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// DefaultPollerTTL is how long a queue seen polled is taken as polled:
// placements of a burst ask Temporal once per worker. A worker that stops
// polling keeps its repositories until its heartbeat goes stale anyway
// (GITFLEET_WORKER_OFFLINE_AFTER), so this adds nothing to that bound.
const DefaultPollerTTL = 15 * time.Second

// PollerCheck tells whether a worker's own Git queue has pollers, as
// Temporal's frontend knows them (DescribeTaskQueue), remembering a yes
// for TTL. Placement trusts a live row in workers only when its
// queue is polled (§11, "Who may place work"): a row written by anyone
// else than a worker polling that queue attracts nothing.
type PollerCheck struct {
	Client client.Client
	// TTL: zero means DefaultPollerTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	answers map[string]pollerAnswer
}

type pollerAnswer struct {
	polled bool
	at     time.Time
}

// NewPollerCheck asks c.
func NewPollerCheck(c client.Client) *PollerCheck { return &PollerCheck{Client: c} }

// Polled says whether queue's activity tasks have pollers. known is false
// when Temporal will not say (a role without the right to describe a
// queue, a server without the call): the caller cannot check, and says so.
func (p *PollerCheck) Polled(ctx context.Context, queue string) (polled, known bool, err error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = DefaultPollerTTL
	}
	p.mu.Lock()
	a, ok := p.answers[queue]
	p.mu.Unlock()
	if ok && now().Sub(a.at) < ttl {
		return a.polled, true, nil
	}
	resp, err := p.Client.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	var denied *serviceerror.PermissionDenied
	var unimpl *serviceerror.Unimplemented
	if errors.As(err, &denied) || errors.As(err, &unimpl) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("pollers of %s: %w", queue, err)
	}
	polled = len(resp.GetPollers()) > 0
	p.mu.Lock()
	if p.answers == nil {
		p.answers = map[string]pollerAnswer{}
	}
	// Forget what is stale, so the map holds the workers of one TTL.
	for q, old := range p.answers {
		if now().Sub(old.at) >= ttl {
			delete(p.answers, q)
		}
	}
	// Only a polled queue is remembered: a worker that just started is
	// given its repositories as soon as its first poll is seen, and a
	// row nobody polls costs a question per placement it would own.
	if polled {
		p.answers[queue] = pollerAnswer{polled: true, at: now()}
	}
	p.mu.Unlock()
	return polled, true, nil
}
