package unittest

import (
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/workflows"
)

// The secret-revalidation schedule runs ValidateSecrets over the fleet,
// daily unless GITFLEET_REVALIDATE_EVERY says otherwise.
func TestSecretRevalidationSchedule(t *testing.T) {
	for _, c := range []struct {
		every, want time.Duration
	}{{0, 24 * time.Hour}, {6 * time.Hour, 6 * time.Hour}} {
		s, ok := workflows.Schedules(workflows.ScheduleConfig{RevalidateEvery: c.every})[workflows.SecretRevalidationScheduleID]
		if !ok {
			t.Fatal("no secret-revalidation schedule")
		}
		if got := s.Spec.Intervals[0].Every; got != c.want {
			t.Errorf("every %s, want %s", got, c.want)
		}
		a := s.Action.(*client.ScheduleWorkflowAction)
		in, ok := a.Args[0].(workflows.ValidateSecretsInput)
		if !ok || in.ShardID != 0 || in.Trigger != "schedule" {
			t.Errorf("action %+v", a.Args)
		}
	}
}
