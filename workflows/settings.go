package workflows

import (
	"cmp"
	"time"
)

// Settings are the operator's settings that the workflows' inputs are
// made from. The worker and the starter both start propagations and apply
// the schedules; these keep them reading the configuration the same way.
// A plain type of the workflows' own: they read no configuration
// (activities.WorkflowSettings fills it from config.Config).
type Settings struct {
	SweepEvery, CleanupEvery, RevalidateEvery, ReconcileEvery time.Duration
	SweepMaxRunning                                           int
	// SweepRanges: a sweep pass's ranges (0: one per live worker).
	SweepRanges                        int
	RunnerHeartbeat, RunnerOffline     time.Duration
	PullAttempt, PullWindow, PullQueue time.Duration
	PullFanout                         int
}

// Propagation is how pulls are bounded and spread (zero values: the
// workflows' defaults). A runner gets new pulls while its heartbeat is
// fresher than RunnerSilentAfter: one that missed a few heartbeats is
// most likely stopped, and a pull sent to it would wait for the whole
// queue bound; the reconcile places the snapshot on it once it is back.
func (s Settings) Propagation() PropagateSnapshotInput {
	return PropagateSnapshotInput{Fanout: s.PullFanout,
		Timing: PullTiming{Attempt: s.PullAttempt, Window: s.PullWindow, Queue: s.PullQueue, Fresh: s.RunnerSilentAfter()}}
}

// SilentBeats is how many heartbeats a runner may miss before it is taken
// for stopped: one late heartbeat (a slow database) is not a stop.
const SilentBeats = 3

// RunnerSilentAfter is how long a runner may go without a heartbeat (by
// the database's clock) before it is taken for stopped: SilentBeats of
// GITFLEET_RUNNER_HEARTBEAT, at most GITFLEET_RUNNER_OFFLINE_AFTER.
func (s Settings) RunnerSilentAfter() time.Duration {
	return min(SilentBeats*cmp.Or(s.RunnerHeartbeat, 10*time.Second), cmp.Or(s.RunnerOffline, 2*time.Minute))
}

// Schedules is the schedules' configuration.
func (s Settings) Schedules() ScheduleConfig {
	return ScheduleConfig{SweepEvery: s.SweepEvery, CleanupEvery: s.CleanupEvery, ReconcileEvery: s.ReconcileEvery,
		RevalidateEvery: s.RevalidateEvery,
		Sweep:           RecollectionSweepInput{MaxRunning: s.SweepMaxRunning, Ranges: s.SweepRanges},
		Reconcile:       ReconcileRunnersInput{OfflineAfter: s.RunnerOffline, Queue: s.PullQueue}}
}
