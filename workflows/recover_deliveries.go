package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// DeliveryRecoveryScheduleID is the Temporal Schedule that starts
// RecoverDeliveries.
const DeliveryRecoveryScheduleID = "webhook-redelivery"

// RecoverDeliveriesInput tunes a recovery; zero values are the defaults.
type RecoverDeliveriesInput struct {
	// Limit bounds the events redelivered per host (0: 100).
	Limit int `json:"limit,omitempty"`
	// Settle is how long a failed attempt is left alone before it is
	// redelivered (0: 2 minutes), so one in flight is not doubled.
	Settle time.Duration `json:"settle,omitempty"`
}

// RecoverDeliveriesResult says what a recovery found and did, over every
// host with a GitHub App.
type RecoverDeliveriesResult struct {
	// Apps counts the hosts whose App's deliveries were listed.
	Apps int `json:"apps"`
	// Events listed within GitHub's retention; Delivered, taken by the
	// receiver; Redelivered, asked for again now; Pending, failed too
	// recently (or past the limit): the next run; GaveUp, failed
	// redelivery.MaxAttempts times; Expired, past GitHub's retention.
	Events, Delivered, Redelivered, Pending, GaveUp, Expired int
}

// RecoverDeliveries asks GitHub to deliver again the App's webhook events
// the receiver did not take (it was down, or Temporal was: answered 503):
// GitHub records every attempt and retries none by itself. A redelivered
// push is collected as any delivery is; one that was handled meanwhile is
// answered 200 and starts nothing. Events older than GitHub's retention
// are the sweep's.
func RecoverDeliveries(ctx workflow.Context, in RecoverDeliveriesInput) (RecoverDeliveriesResult, error) {
	var out RecoverDeliveriesResult
	opts := apiOptions
	opts.StartToCloseTimeout, opts.HeartbeatTimeout = 10*time.Minute, time.Minute
	if err := workflow.ExecuteActivity(withOptions(ctx, opts), activityRecoverDeliveries, in).Get(ctx, &out); err != nil {
		return out, err
	}
	summary := "no GitHub App configured: nothing to recover"
	if out.Apps > 0 {
		summary = fmt.Sprintf("%d events in GitHub's retention: %d delivered, %d redelivered now, %d pending, %d given up, %d expired",
			out.Events, out.Delivered, out.Redelivered, out.Pending, out.GaveUp, out.Expired)
	}
	workflow.SetCurrentDetails(ctx, summary)
	return out, nil
}
