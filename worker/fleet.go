package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// Fleet bookkeeping runs on these periods: a heartbeat (six within
// GITFLEET_WORKER_OFFLINE_AFTER's default), the mirrors' sizes (a walk of
// the mirror directory) and the quota.
const (
	fleetHeartbeat = 10 * time.Second
	fleetUsage     = time.Minute
)

// joinFleet registers the worker (it owns repositories from now on: their
// Git work comes to its own queue), then heartbeats with the mirrors it
// holds and keeps them within the quota, until ctx ends.
func joinFleet(ctx context.Context, st *store.Store, f config.Fleet, mirrors *mirror.Mirrors, log *zap.Logger) error {
	if err := st.RegisterWorker(ctx, f.WorkerID, workflows.TaskQueue); err != nil {
		return err
	}
	go func() {
		beat := time.NewTicker(fleetHeartbeat)
		defer beat.Stop()
		var held, bytes int64
		var counted time.Time
		for {
			if time.Since(counted) >= fleetUsage {
				if f.MirrorQuota > 0 {
					evicted, err := mirrors.Evict(ctx, f.MirrorQuota)
					if err != nil && ctx.Err() == nil {
						log.Warn("mirror quota", zap.Error(err))
					}
					if len(evicted) > 0 {
						log.Info("mirrors evicted over the quota", zap.Int("mirrors", len(evicted)), zap.Int64("quota", f.MirrorQuota))
					}
				}
				var err error
				if held, bytes, err = mirrors.Usage(); err != nil {
					log.Warn("mirror usage", zap.Error(err))
				}
				counted = time.Now()
			}
			if err := st.HeartbeatWorker(ctx, f.WorkerID, held, bytes); err != nil && ctx.Err() == nil {
				// Forgotten (the row deleted): register again.
				log.Warn("worker heartbeat", zap.Error(err))
				_ = st.RegisterWorker(ctx, f.WorkerID, workflows.TaskQueue)
			}
			select {
			case <-ctx.Done():
				return
			case <-beat.C:
			}
		}
	}()
	return nil
}
