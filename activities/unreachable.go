package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"gitfleet/internal/infra/errclass"
)

// DefaultUnreachableWaits are the waits before each retry of a fetch
// whose host does not resolve or refuses connections: about two and a
// half minutes in all, long enough for a DNS blip or a restarting server,
// short enough that a mistyped host fails the scan while its user
// watches. The attempt after the last wait that fails too gives up.
var DefaultUnreachableWaits = []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}

// boundUnreachable paces and bounds the retries of err when its host is
// unreachable (errclass.ReasonUnreachable): attempt n waits waits[n-1]
// before the next, and the attempt past the last wait is Permanent, "gave
// up after N attempts: <cause>". The retry policy alone would retry it
// for the activity's whole schedule-to-close (hours), and a host that does
// not exist will not come to exist. Other errors pass as they are.
func boundUnreachable(ctx context.Context, waits []time.Duration, err error) error {
	c := errclass.Classify(err)
	if c == nil || c.Class != errclass.Retryable || c.Reason != errclass.ReasonUnreachable || !activity.IsActivity(ctx) {
		return err
	}
	if waits == nil {
		waits = DefaultUnreachableWaits
	}
	attempt := int(activity.GetInfo(ctx).Attempt)
	if attempt > len(waits) {
		return errclass.Wrap(errclass.Permanent, errclass.ReasonUnreachable,
			fmt.Errorf("gave up after %d attempts: %s: %w", attempt, errclass.UnreachableCause(err), err))
	}
	return &errclass.Error{Class: errclass.Retryable, Reason: errclass.ReasonUnreachable, RetryAfter: waits[attempt-1], Err: err}
}
