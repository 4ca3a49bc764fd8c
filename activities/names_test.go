package activities_test

import (
	"reflect"
	"slices"
	"testing"

	"go.temporal.io/sdk/activity"

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
			&activities.Cleanup{}, &activities.CodeScanning{}, &activities.Notifications{}},
			append(append(append([]string{}, workflows.ActivityNames...), workflows.SnapshotActivityNames...), workflows.CodeScanningActivityNames...)},
		{"runner-<id>", []any{&activities.Runner{}}, workflows.RunnerActivityNames},
		{"gitfleet:git:<worker>", []any{&activities.Builds{}}, workflows.BuildActivityNames},
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

// A runner's admin queue serves exactly the activities the workflows
// schedule there.
func TestRunnerAdminQueueServesTheAdminActivities(t *testing.T) {
	var pulls, admin names
	activities.RegisterRunner(&pulls, &admin, &activities.Runner{})
	slices.Sort(admin.got)
	want := slices.Sorted(slices.Values(workflows.RunnerAdminActivityNames))
	if !slices.Equal(admin.got, want) {
		t.Errorf("admin queue serves %v, want %v", admin.got, want)
	}
	if len(pulls.structs) != 1 {
		t.Errorf("pull queue: %d structs registered, want the Runner", len(pulls.structs))
	}
}

// names records what is registered.
type names struct {
	got     []string
	structs []any
}

func (n *names) RegisterActivity(a any) { n.structs = append(n.structs, a) }
func (n *names) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	n.got = append(n.got, o.Name)
}
func (n *names) RegisterDynamicActivity(any, activity.DynamicRegisterOptions) {}
