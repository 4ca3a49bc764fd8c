package workflows

import (
	"cmp"
	"time"

	"gitfleet/internal/infra/config"
)

// The worker and the starter both start propagations and apply the
// schedules; these keep them reading the configuration the same way.

// PropagationFrom is how pulls are bounded and spread, from the
// configuration (zero values: the workflows' defaults). A runner gets new
// pulls while its heartbeat is fresher than RunnerSilentAfter: one that
// missed a few heartbeats is most likely stopped, and a pull sent to it
// would wait for the whole queue bound; the reconcile places the snapshot
// on it once it is back.
func PropagationFrom(cfg config.Config) PropagateSnapshotInput {
	return PropagateSnapshotInput{Fanout: cfg.PullFanout,
		Timing: PullTiming{Attempt: cfg.PullAttempt, Window: cfg.PullWindow, Queue: cfg.PullQueue, Fresh: RunnerSilentAfter(cfg)}}
}

// SilentBeats is how many heartbeats a runner may miss before it is taken
// for stopped: one late heartbeat (a slow database) is not a stop.
const SilentBeats = 3

// RunnerSilentAfter is how long a runner may go without a heartbeat (by
// the database's clock) before it is taken for stopped: SilentBeats of
// GITFLEET_RUNNER_HEARTBEAT, at most GITFLEET_RUNNER_OFFLINE_AFTER.
func RunnerSilentAfter(cfg config.Config) time.Duration {
	return min(SilentBeats*cmp.Or(cfg.RunnerHeartbeat, 10*time.Second), cmp.Or(cfg.RunnerOffline, 2*time.Minute))
}

// ScheduleConfigFrom is the schedules' configuration.
func ScheduleConfigFrom(cfg config.Config) ScheduleConfig {
	return ScheduleConfig{SweepEvery: cfg.SweepEvery, CleanupEvery: cfg.CleanupEvery, ReconcileEvery: cfg.ReconcileEvery,
		RevalidateEvery: cfg.RevalidateEvery,
		Sweep:           RecollectionSweepInput{MaxRunning: cfg.SweepMaxRunning},
		Reconcile:       ReconcileRunnersInput{OfflineAfter: cfg.RunnerOffline, Queue: cfg.PullQueue}}
}
