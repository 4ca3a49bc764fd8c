package activities

import (
	"gitfleet/internal/infra/config"
	"gitfleet/workflows"
)

// WorkflowSettings is what the workflows' inputs are made from, out of the
// configuration: the worker and the starter both call it, so that they
// start propagations and apply schedules alike.
func WorkflowSettings(cfg config.Config) workflows.Settings {
	return workflows.Settings{
		SweepEvery: cfg.SweepEvery, CleanupEvery: cfg.CleanupEvery, RevalidateEvery: cfg.RevalidateEvery,
		ReconcileEvery: cfg.ReconcileEvery, SweepMaxRunning: cfg.SweepMaxRunning,
		SweepRanges:     cfg.SweepRanges,
		RunnerHeartbeat: cfg.RunnerHeartbeat, RunnerOffline: cfg.RunnerOffline,
		PullAttempt: cfg.PullAttempt, PullWindow: cfg.PullWindow, PullQueue: cfg.PullQueue, PullFanout: cfg.PullFanout,
	}
}
