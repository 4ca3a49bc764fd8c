package config_test

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"gitfleet/activities"
	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/validate"
	"gitfleet/workflows"
)

// The defaults the table declares are the ones the readers fall back on
// when a Config made by hand leaves a field zero (Load always fills them
// from the table): the scan batch, the scanner's depths, gitread's limits,
// the workflows' bounds and intervals, the decay table, the worker's GC
// target, the validity checks' bounds (read by validate.FromEnv, not Load). Issue 36: `worker --help` once said the scan batch was 2,000
// where the code said 8,000.
func TestDeclaredDefaultsAreTheCodes(t *testing.T) {
	def := func(name string) string {
		s, ok := config.Lookup(name)
		if !ok || s.Default == "" {
			t.Fatalf("%s: no declared default", name)
		}
		return s.Default
	}
	dur := func(name string) time.Duration {
		v := def(name)
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%s: %v", name, v, err)
		}
		return d
	}
	size := func(name string) int64 {
		n, err := config.ParseBytes(def(name))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	schedules := workflows.Schedules(workflows.ScheduleConfig{})
	every := func(id string) time.Duration { return schedules[id].Spec.Intervals[0].Every }
	// A runner is silent after 3 heartbeats, at most the offline bound:
	// each default shows with the other one out of the way.
	silentBeats := workflows.Settings{RunnerOffline: 24 * time.Hour}.RunnerSilentAfter() / workflows.SilentBeats
	offline := workflows.Settings{RunnerHeartbeat: 24 * time.Hour}.RunnerSilentAfter()
	checker, err := validate.New(validate.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, code any
	}{
		{config.EnvScanBatch, def(config.EnvScanBatch), strconv.Itoa(activities.DefaultBatchBlobs)},
		{config.EnvScanDecodeDepth, def(config.EnvScanDecodeDepth), strconv.Itoa(scan.DefaultDecodeDepth)},
		{config.EnvScanArchiveDepth, def(config.EnvScanArchiveDepth), strconv.Itoa(scan.DefaultArchiveDepth)},
		{config.EnvMaxObjectBytes, size(config.EnvMaxObjectBytes), int64(gitread.DefaultMaxObjectBytes)},
		{config.EnvMaxPackBytes, size(config.EnvMaxPackBytes), int64(gitread.DefaultMaxPackBytes)},
		{config.EnvSweepMaxRunning, def(config.EnvSweepMaxRunning), strconv.Itoa(workflows.DefaultMaxRunning)},
		{config.EnvSweepEvery, dur(config.EnvSweepEvery), every(workflows.SweepScheduleID)},
		{config.EnvCleanupEvery, dur(config.EnvCleanupEvery), every(workflows.StaleCleanupScheduleID)},
		{config.EnvReconcileEvery, dur(config.EnvReconcileEvery), every(workflows.ReconcileScheduleID)},
		{config.EnvRevalidateEvery, dur(config.EnvRevalidateEvery), every(workflows.SecretRevalidationScheduleID)},
		{config.EnvRunnerHeartbeat, dur(config.EnvRunnerHeartbeat), silentBeats},
		{config.EnvRunnerOffline, dur(config.EnvRunnerOffline), offline},
		{config.EnvDecay, parseDecay(t, def(config.EnvDecay)), decay.Default},
		{"GOGC", def("GOGC"), strconv.Itoa(config.WorkerGCPercent)},
		{validate.EnvInFlight, def(validate.EnvInFlight), strconv.Itoa(checker.Settings().InFlight)},
		{validate.EnvPerMinute, def(validate.EnvPerMinute), strconv.Itoa(checker.Settings().PerMinute)},
	} {
		if !reflect.DeepEqual(tc.got, tc.code) {
			t.Errorf("%s: declared default %v, the code's %v", tc.name, tc.got, tc.code)
		}
	}
}

func parseDecay(t *testing.T, v string) decay.Table {
	d, err := decay.Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
