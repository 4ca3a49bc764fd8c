package workflows

import "gitfleet/internal/infra/config"

// The worker and the starter both start propagations and apply the
// schedules; these keep them reading the configuration the same way.

// PropagationFrom is how pulls are bounded and spread, from the
// configuration (zero values: the workflows' defaults).
func PropagationFrom(cfg config.Config) PropagateSnapshotInput {
	return PropagateSnapshotInput{Fanout: cfg.PullFanout,
		Timing: PullTiming{Attempt: cfg.PullAttempt, Window: cfg.PullWindow, Queue: cfg.PullQueue, Fresh: cfg.RunnerOffline}}
}

// ScheduleConfigFrom is the schedules' configuration.
func ScheduleConfigFrom(cfg config.Config) ScheduleConfig {
	return ScheduleConfig{SweepEvery: cfg.SweepEvery, CleanupEvery: cfg.CleanupEvery, ReconcileEvery: cfg.ReconcileEvery,
		RevalidateEvery: cfg.RevalidateEvery,
		Sweep:           RecollectionSweepInput{MaxRunning: cfg.SweepMaxRunning},
		Reconcile:       ReconcileRunnersInput{OfflineAfter: cfg.RunnerOffline, Queue: cfg.PullQueue}}
}
