package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"gitfleet/internal/domain/redelivery"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/workflows"
)

// maxDeliveryPages bounds the pages of 100 attempts a recovery lists per
// App: 20,000 attempts in GitHub's three days, a busy fleet's.
const maxDeliveryPages = 200

// RecoverDeliveries lists each GitHub App's webhook deliveries of the
// last three days and asks GitHub to deliver again the events the
// receiver did not take (redelivery.Decide).
func (a *Activities) RecoverDeliveries(ctx context.Context, in workflows.RecoverDeliveriesInput) (workflows.RecoverDeliveriesResult, error) {
	if in.Limit <= 0 {
		in.Limit = 100
	}
	if in.Settle <= 0 {
		in.Settle = 2 * time.Minute
	}
	var out workflows.RecoverDeliveriesResult
	for _, host := range a.Hosts.Names() {
		app, ok := a.Creds.Source(host).(*gitcreds.App)
		if !ok {
			continue
		}
		out.Apps++
		now := time.Now()
		attempts, err := app.HookDeliveries(ctx, now.Add(-redelivery.Retention), maxDeliveryPages, func(n int) {
			activity.RecordHeartbeat(ctx, fmt.Sprintf("%s: %d pages of deliveries listed", host, n))
		})
		if err != nil {
			return out, AppError(fmt.Errorf("list the webhook deliveries of %s on %s: %w", app.Kind(), host, err))
		}
		p := redelivery.Decide(attempts, now, in.Settle, in.Limit)
		out.Events += p.Events
		out.Delivered += p.Delivered
		out.Pending += p.Pending
		out.GaveUp += p.GaveUp
		out.Expired += p.Expired
		for _, at := range p.Redeliver {
			if err := app.Redeliver(ctx, at.ID); err != nil {
				return out, AppError(fmt.Errorf("redeliver %s delivery %s on %s: %w", at.Event, at.GUID, host, err))
			}
			out.Redelivered++
			activity.RecordHeartbeat(ctx, fmt.Sprintf("%s: %d redelivered", host, out.Redelivered))
		}
		a.logger(ctx).Info("Webhook deliveries recovered", zap.String("host", host), zap.Int("events", p.Events),
			zap.Int("redelivered", len(p.Redeliver)), zap.Int("pending", p.Pending), zap.Int("gaveUp", p.GaveUp), zap.Int("expired", p.Expired))
	}
	return out, nil
}
