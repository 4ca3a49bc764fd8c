package activities_test

import (
	"reflect"
	"testing"

	"gitfleet/activities"
	"gitfleet/workflows"
)

// Workflows schedule activities by name: every name they use must be a
// method of one of the structs the worker registers, and no method is
// left that nothing schedules.
func TestWorkflowsScheduleRegisteredActivities(t *testing.T) {
	methods := map[string]bool{}
	for _, v := range []any{&activities.Activities{}, &activities.Shards{}, &activities.Sweeps{}, &activities.GitHub{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumMethod() {
			methods[typ.Method(i).Name] = true
		}
	}
	for _, name := range workflows.ActivityNames {
		if !methods[name] {
			t.Errorf("workflows schedule activity %q, which no activities struct has", name)
		}
		delete(methods, name)
	}
	for name := range methods {
		t.Errorf("activity method %s is registered but no workflow schedules it", name)
	}
}
