package main

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"gitfleet/internal/domain/placement"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// Fleet bookkeeping runs on these periods: a heartbeat (six within
// GITFLEET_WORKER_OFFLINE_AFTER's default), and the mirrors' upkeep
// (mirrors of others' repositories, the quota, repacks, their count and
// bytes).
const (
	fleetHeartbeat = 10 * time.Second
	fleetUpkeep    = time.Minute
)

// unownedGrace is how long a worker keeps the mirror of a repository
// another worker owns: a drain undone, a worker back within the hour, keep
// their mirrors; past it a move leaves one copy, not one per owner it had.
const unownedGrace = time.Hour

// fleetStore is what the fleet's bookkeeping asks of the database.
type fleetStore interface {
	RegisterWorker(ctx context.Context, id, taskQueue string) error
	HeartbeatWorker(ctx context.Context, id string, mirrors, bytes int64) error
	LiveWorkers(ctx context.Context, taskQueue string, fresh time.Duration) ([]string, error)
}

// fleet is a worker's membership: its heartbeat, and the upkeep of its
// mirrors on a goroutine of its own. The heartbeat never waits for the
// upkeep (a quota pass over thousands of mirrors, a busy disk): it sends
// the last count the upkeep made, so a slow disk cannot make the worker
// look dead and move 1/N of the fleet's repositories.
type fleet struct {
	st      fleetStore
	f       config.Fleet
	mirrors *mirror.Mirrors
	log     *zap.Logger

	held, bytes atomic.Int64 // the last count of the mirrors
	// upkeepOnce is one pass of the upkeep (a test makes it slow).
	upkeepOnce func(ctx context.Context)
}

func newFleet(st fleetStore, f config.Fleet, mirrors *mirror.Mirrors, log *zap.Logger) *fleet {
	fl := &fleet{st: st, f: f, mirrors: mirrors, log: log}
	fl.upkeepOnce = fl.upkeep
	return fl
}

// joinFleet registers the worker (it owns repositories from now on: their
// Git work comes to its own queue), then heartbeats and keeps its mirrors,
// until ctx ends.
func joinFleet(ctx context.Context, st fleetStore, f config.Fleet, mirrors *mirror.Mirrors, log *zap.Logger) error {
	fl := newFleet(st, f, mirrors, log)
	if err := st.RegisterWorker(ctx, f.WorkerID, workflows.TaskQueue); err != nil {
		return err
	}
	beat, upkeep := time.NewTicker(fleetHeartbeat), time.NewTicker(fleetUpkeep)
	go func() {
		defer beat.Stop()
		fl.heartbeatLoop(ctx, beat.C)
	}()
	go func() {
		defer upkeep.Stop()
		fl.upkeepLoop(ctx, upkeep.C)
	}()
	return nil
}

// heartbeatLoop heartbeats now and on every tick, with the mirrors' last
// count.
func (fl *fleet) heartbeatLoop(ctx context.Context, tick <-chan time.Time) {
	for {
		if err := fl.st.HeartbeatWorker(ctx, fl.f.WorkerID, fl.held.Load(), fl.bytes.Load()); err != nil && ctx.Err() == nil {
			// Forgotten (the row deleted): register again.
			fl.log.Warn("worker heartbeat", zap.Error(err))
			_ = fl.st.RegisterWorker(ctx, fl.f.WorkerID, workflows.TaskQueue)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// upkeepLoop keeps the mirrors now and on every tick.
func (fl *fleet) upkeepLoop(ctx context.Context, tick <-chan time.Time) {
	for {
		fl.upkeepOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// upkeep removes the mirrors this worker has not owned for unownedGrace,
// keeps the rest within the quota, merges the packs of those past
// mirror.RepackAbove, then counts them for the heartbeat.
func (fl *fleet) upkeep(ctx context.Context) {
	owned := fl.owned(ctx)
	if owned != nil {
		released, err := fl.mirrors.ReleaseUnowned(ctx, owned, unownedGrace, time.Now())
		if err != nil && ctx.Err() == nil {
			fl.log.Warn("mirrors of other workers' repositories", zap.Error(err))
		}
		if len(released) > 0 {
			fl.log.Info("mirrors removed: their repositories are other workers' for an hour", zap.Int("mirrors", len(released)))
		}
	}
	if fl.f.MirrorQuota > 0 {
		evicted, err := fl.mirrors.Evict(ctx, fl.f.MirrorQuota, owned)
		if err != nil && ctx.Err() == nil {
			fl.log.Warn("mirror quota", zap.Error(err))
		}
		if len(evicted) > 0 {
			fl.log.Info("mirrors evicted over the quota", zap.Int("mirrors", len(evicted)), zap.Int64("quota", fl.f.MirrorQuota))
		}
	}
	repacked, err := fl.mirrors.Repack(ctx, mirror.RepackAbove)
	if err != nil && ctx.Err() == nil {
		fl.log.Warn("mirror repack", zap.Error(err))
	}
	if len(repacked) > 0 {
		fl.log.Info("mirrors repacked", zap.Int("mirrors", len(repacked)))
	}
	held, bytes, err := fl.mirrors.Usage()
	if err != nil {
		fl.log.Warn("mirror usage", zap.Error(err))
		return
	}
	fl.held.Store(held)
	fl.bytes.Store(bytes)
}

// owned tells which repositories this worker owns now, the way placement
// decides (§2, "Repository affinity"); nil when that cannot be known (the
// database unreachable, or no live worker: every row stale at once), so
// nothing is taken for another worker's.
func (fl *fleet) owned(ctx context.Context) mirror.Owned {
	live, err := fl.st.LiveWorkers(ctx, workflows.TaskQueue, fl.f.WorkerOffline)
	if err != nil || len(live) == 0 {
		return nil
	}
	return func(url string) bool { return placement.Owner(placement.URLKey(url), live) == fl.f.WorkerID }
}
