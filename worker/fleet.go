package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"gitfleet/activities"
	"gitfleet/internal/domain/placement"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// Fleet bookkeeping runs on these periods: a heartbeat (six within
// GITFLEET_WORKER_OFFLINE_AFTER's default), the mirrors' upkeep (mirrors
// of others' repositories, the quota, repacks, their count and bytes), and
// the forgetting of workers silent for a day.
const (
	fleetHeartbeat = 10 * time.Second
	fleetUpkeep    = time.Minute
	fleetForget    = time.Hour
	// forgetWorkersAfter: a worker silent (left or dead) this long has its
	// row deleted; it owns nothing long before, and placement no longer
	// counts it as part of the fleet.
	forgetWorkersAfter = activities.ForgetWorkersAfter
	// probeTimeout bounds the heartbeat's question to Temporal's frontend,
	// well within a beat: an unanswered one withholds the beat.
	probeTimeout = 5 * time.Second
	// leaveTimeout bounds the leave a stopping worker writes.
	leaveTimeout = 5 * time.Second
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
	LeaveWorker(ctx context.Context, id string) error
	ForgetWorkers(ctx context.Context, after time.Duration) ([]string, error)
}

// fleet is a worker's membership: its heartbeat, sent only while the
// worker polls its own queue, and the upkeep of its mirrors on a goroutine
// of its own. The heartbeat never waits for the upkeep (a quota pass over
// thousands of mirrors, a busy disk): it sends the last count the upkeep
// made, so a slow disk cannot make the worker look dead and move 1/N of
// the fleet's repositories.
type fleet struct {
	st      fleetStore
	f       config.Fleet
	mirrors *mirror.Mirrors
	log     *zap.Logger

	held, bytes atomic.Int64 // the last count of the mirrors
	// upkeepOnce is one pass of the upkeep (a test makes it slow).
	upkeepOnce func(ctx context.Context)
	// alive says why the worker does not poll its queue now (nil: it
	// does); nil, it always does.
	alive func(ctx context.Context) error

	stop    chan struct{} // leave: the heartbeats end
	stopped chan struct{} // the heartbeat loop has returned
	once    sync.Once
}

func newFleet(st fleetStore, f config.Fleet, mirrors *mirror.Mirrors, log *zap.Logger) *fleet {
	fl := &fleet{st: st, f: f, mirrors: mirrors, log: log, stop: make(chan struct{}), stopped: make(chan struct{})}
	fl.upkeepOnce = fl.upkeep
	return fl
}

// joinFleet registers the worker once it polls its queue (it owns
// repositories from now on: their Git work comes to its own queue), then
// heartbeats — while alive says it polls — keeps its mirrors and forgets
// the workers gone for a day, until ctx ends or it leaves.
func joinFleet(ctx context.Context, st fleetStore, f config.Fleet, alive func(context.Context) error,
	mirrors *mirror.Mirrors, log *zap.Logger) (*fleet, error) {
	fl := newFleet(st, f, mirrors, log)
	fl.alive = alive
	// Registered only once it polls; otherwise its first heartbeat
	// registers it (a missing row is registered again).
	if err := alive(ctx); err != nil {
		log.Warn("not polling its queue yet: it registers once it does", zap.String("queue", fl.queue()), zap.Error(err))
	} else if err := st.RegisterWorker(ctx, f.WorkerID, workflows.TaskQueue); err != nil {
		return nil, err
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
	return fl, nil
}

func (fl *fleet) queue() string { return workflows.WorkerGitQueue(workflows.TaskQueue, fl.f.WorkerID) }

// heartbeatLoop heartbeats now and on every tick, with the mirrors' last
// count, while the worker polls its queue; it forgets the workers silent
// for a day every fleetForget. It returns when ctx ends or the worker
// leaves.
func (fl *fleet) heartbeatLoop(ctx context.Context, tick <-chan time.Time) {
	defer close(fl.stopped)
	var forgot time.Time
	withheld := false
	for {
		// A worker the database hears but Temporal does not (a network
		// policy, an expired certificate, DNS) must not keep its
		// repositories: their work would wait on a queue nobody polls.
		// Silent, it goes offline, and they move.
		var notPolling error
		if fl.alive != nil {
			notPolling = fl.alive(ctx)
		}
		if notPolling != nil {
			if ctx.Err() == nil && !withheld {
				fl.log.Warn("not polling its queue: heartbeat withheld, its repositories move to others past the offline bound",
					zap.String("queue", fl.queue()), zap.Error(notPolling))
			}
			withheld = true
		} else {
			if withheld {
				fl.log.Info("polling its queue again: heartbeat resumed", zap.String("queue", fl.queue()))
			}
			withheld = false
			if err := fl.st.HeartbeatWorker(ctx, fl.f.WorkerID, fl.held.Load(), fl.bytes.Load()); err != nil && ctx.Err() == nil {
				// Forgotten (the row deleted): register again.
				fl.log.Warn("worker heartbeat", zap.Error(err))
				_ = fl.st.RegisterWorker(ctx, fl.f.WorkerID, workflows.TaskQueue)
			}
		}
		if time.Since(forgot) >= fleetForget {
			if ids, err := fl.st.ForgetWorkers(ctx, forgetWorkersAfter); err != nil && ctx.Err() == nil {
				fl.log.Warn("forget workers", zap.Error(err))
			} else if len(ids) > 0 {
				fl.log.Info("workers silent for a day forgotten", zap.Strings("workers", ids))
			}
			forgot = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-fl.stop:
			return
		case <-tick:
		}
	}
}

// leave stops the heartbeats and marks the worker gone, before it drains:
// its repositories' new work goes to their next owners at once, while the
// work it runs finishes here. ctx may have ended (a signal): the leave has
// a bound of its own.
func (fl *fleet) leave() {
	fl.once.Do(func() {
		close(fl.stop)
		<-fl.stopped
		ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
		defer cancel()
		if err := fl.st.LeaveWorker(ctx, fl.f.WorkerID); err != nil {
			fl.log.Warn("could not leave the fleet: its repositories move once it is silent past the offline bound", zap.Error(err))
			return
		}
		fl.log.Info("left the fleet: its repositories go to their next owners", zap.String("workerId", fl.f.WorkerID))
	})
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

// pollWatch follows this worker's polls of one queue, as they pass through
// the Temporal client's connection.
type pollWatch struct {
	queue string

	mu       sync.Mutex
	lastOK   time.Time // a poll answered (a task, or none within the long poll)
	lastErr  time.Time // a poll failed
	err      error
	inflight map[uint64]time.Time // polls waiting for their answer, by when they were sent
	seq      uint64
}

func newPollWatch(queue string) *pollWatch {
	return &pollWatch{queue: queue, inflight: map[uint64]time.Time{}}
}

// interceptor sees every unary call of the client; it records the
// outcome of the polls of the watched queue.
func (p *pollWatch) interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		poll, ok := req.(*workflowservice.PollActivityTaskQueueRequest)
		if !ok || poll.GetTaskQueue().GetName() != p.queue {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		p.mu.Lock()
		p.seq++
		id := p.seq
		p.inflight[id] = time.Now()
		p.mu.Unlock()
		err := invoker(ctx, method, req, reply, cc, opts...)
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.inflight, id)
		switch {
		case err == nil:
			p.lastOK = time.Now()
		case ctx.Err() != nil:
			// The worker stopping its pollers: no verdict on the queue.
		default:
			p.lastErr, p.err = time.Now(), err
		}
		return err
	}
}

// failing says why the worker does not poll its queue: its last poll
// failed and none sent since is waiting for its answer (the SDK backs off
// between failed polls). A busy worker, every slot taken, sends no polls
// and is not failing: its queue waits for it.
func (p *pollWatch) failing() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.lastErr.After(p.lastOK) {
		return nil
	}
	for _, sent := range p.inflight {
		if !sent.Before(p.lastErr) {
			return nil
		}
	}
	return fmt.Errorf("its polls of %s fail: %w", p.queue, p.err)
}

// polling is the heartbeat's condition: Temporal's frontend answers this
// worker about its own queue now (a partition from Temporal alone fails
// here within probeTimeout), and its polls of that queue are not failing.
func polling(c client.Client, queue string, polls *pollWatch) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := polls.failing(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		_, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		var denied *serviceerror.PermissionDenied
		var unimpl *serviceerror.Unimplemented
		if errors.As(err, &denied) || errors.As(err, &unimpl) {
			// The frontend answered: a role without this read still
			// polls, and the polls' own failures count above.
			return nil
		}
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("Temporal did not answer within %s: %w", probeTimeout, err)
			}
			return fmt.Errorf("Temporal: %w", err)
		}
		return nil
	}
}
