package activities_test

import (
	"reflect"
	"testing"

	"gitfleet/activities"
	"gitfleet/workflows"
)

// Workflows schedule activities by name: every name they use must be a
// method of one of the structs the worker registers on that task queue,
// and no method is left that nothing schedules.
func TestWorkflowsScheduleRegisteredActivities(t *testing.T) {
	for _, tc := range []struct {
		queue   string
		structs []any
		names   []string
	}{
		{"gitfleet", []any{&activities.Activities{}, &activities.Shards{}, &activities.Sweeps{}, &activities.GitHub{}, &activities.Snapshots{},
			&activities.Cleanup{}},
			append(append([]string{}, workflows.ActivityNames...), workflows.SnapshotActivityNames...)},
		{"runner-<id>", []any{&activities.Runner{}}, workflows.RunnerActivityNames},
	} {
		methods := map[string]bool{}
		for _, v := range tc.structs {
			typ := reflect.TypeOf(v)
			for i := range typ.NumMethod() {
				methods[typ.Method(i).Name] = true
			}
		}
		for _, name := range tc.names {
			if !methods[name] {
				t.Errorf("workflows schedule activity %q on %s, which no activities struct there has", name, tc.queue)
			}
			delete(methods, name)
		}
		for name := range methods {
			t.Errorf("activity method %s is registered on %s but no workflow schedules it", name, tc.queue)
		}
	}
}
