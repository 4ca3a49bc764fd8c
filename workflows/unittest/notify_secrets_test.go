package unittest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"gitfleet/activities"
	"gitfleet/internal/infra/errclass"
	"gitfleet/workflows"
)

// A receiver down for 10 minutes, on the workflow's own retry policy (the
// test suite's clock skips the waits): the message is tried again with
// backoff, and delivered within a minute of the receiver's return; one
// receiver refusing its message (Permanent) does not hold up the other's.
func TestNotifySecretsOutlastsAReceiverDownTenMinutes(t *testing.T) {
	for _, down := range []time.Duration{30 * time.Second, 10 * time.Minute, 2 * time.Hour} {
		t.Run(down.String(), func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(workflows.NotifySecrets)
			env.RegisterActivity(&activities.Notifications{})
			var n *activities.Notifications
			env.OnActivity(n.PrepareNotifications, mock.Anything, mock.Anything).Return([]workflows.PreparedMessage{
				{ID: "m-up", Receiver: "up", Alerts: 3}, {ID: "m-refused", Receiver: "refused", Alerts: 3},
			}, nil).Once()
			start := env.Now()
			var mu sync.Mutex
			var attempts int
			var deliveredAt time.Time
			env.OnActivity(n.SendNotification, mock.Anything, workflows.SendNotificationInput{ID: "m-up"}).Return(
				func(context.Context, workflows.SendNotificationInput) error {
					mu.Lock()
					defer mu.Unlock()
					attempts++
					if env.Now().Sub(start) < down {
						return temporal.NewApplicationError("receiver up: dial: connection refused", string(errclass.Retryable), "unavailable")
					}
					deliveredAt = env.Now()
					return nil
				})
			env.OnActivity(n.SendNotification, mock.Anything, workflows.SendNotificationInput{ID: "m-refused"}).Return(
				temporal.NewNonRetryableApplicationError("receiver refused answered 404", string(errclass.Permanent), nil, "refused")).Once()
			env.ExecuteWorkflow(workflows.NotifySecrets, workflows.NotifySecretsInput{Kind: workflows.NotifyNew, Shards: []int64{7}})
			var out workflows.NotifySecretsResult
			if err := env.GetWorkflowResult(&out); err != nil {
				t.Fatal(err)
			}
			if out.Messages != 1 || out.Alerts != 3 || out.Failed != 1 {
				t.Errorf("result %+v, want one message of 3 delivered and one failed", out)
			}
			back := start.Add(down)
			if deliveredAt.Before(back) || deliveredAt.Sub(back) > time.Minute {
				t.Errorf("delivered %v after the receiver's return, want within a minute (%d attempts)", deliveredAt.Sub(back), attempts)
			}
			if attempts < 2 {
				t.Errorf("%d attempts", attempts)
			}
			env.AssertExpectations(t)
		})
	}
}
