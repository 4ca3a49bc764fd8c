package activities

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/liveness"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
)

// Shards are the shard execution activities (architecture §4). They log digests
// and counts only: never secrets, file paths, refs or commit ids of the
// content they scan.
type Shards struct {
	Store   *store.Store
	Mirrors *mirror.Mirrors
	Scanner *scan.Scanner
	Log     *zap.Logger
	// LeaseFor is how long a lease lasts between renewals (default 1 min);
	// the scan renews it every third of that.
	LeaseFor time.Duration
	// BatchBlobs is how many blobs a scan handles between durable writes
	// of its data ops (default 2,000).
	BatchBlobs int
	// ScanSlots, if not nil, bounds the blobs the worker's scans read and
	// scan at once, all scans together (a token each); nil: GOMAXPROCS
	// per scan.
	ScanSlots chan struct{}
	// Budget is how long one attempt of a scan given no budget of its own
	// (ShardWork.MaxDuration 0) runs before it stops and finalizes what it
	// did (default DefaultScanBudget): the workflow's next pass continues.
	Budget time.Duration
	// HeartbeatEvery is how often an activity that is alive heartbeats
	// (default: a third of its heartbeat timeout); Heartbeat records one
	// (nil: activity.RecordHeartbeat).
	HeartbeatEvery time.Duration
	Heartbeat      func(ctx context.Context, details map[string]int64)
	// Liveness bounds the silence of a remote during a mirror sync (zero:
	// fitted to the heartbeat timeout, see within).
	Liveness liveness.Bounds
	// UnreachableWaits pace the retries of a fetch from a host that does
	// not resolve or refuses connections, and bound them (nil:
	// DefaultUnreachableWaits; see boundUnreachable).
	UnreachableWaits []time.Duration
	// Stages, when set, adds up where the scans' time goes (a benchmark's
	// breakdown; nil: not measured).
	Stages *ScanStages
}

// ScanStages is where ScanShard's time goes, summed over the goroutines
// of each stage (stages overlap: the walk runs while the previous batch is
// read and scanned and the one before is written).
type ScanStages struct{ ns [stageCount]atomic.Int64 }

type stage int

const (
	// stageSetup: opening the repository, the scope's state from the
	// database, the refs and the packs, up to the walk.
	stageSetup stage = iota
	// stageWalk: the walk's goroutine reading and diffing commits and
	// trees, less the time it waited for the batch in flight.
	stageWalk
	// stageSeen: asking the database which of a batch's blobs the scope saw.
	stageSeen
	// stageInflate: reading the blobs from the packs (zlib, deltas).
	stageInflate
	// stageScan: the scanner, all of Scanner.Scan (scan.Timing splits it).
	stageScan
	// stageWrite: writing the batches' data ops.
	stageWrite
	// stageFinalize: after the walk and the last batch, up to the receipt.
	stageFinalize
	stageCount
)

var stageNames = [stageCount]string{"setup", "walk", "seen", "inflate", "scan", "write", "finalize"}

// StageTime is one stage's time.
type StageTime struct {
	Stage string        `json:"stage"`
	Time  time.Duration `json:"time"`
}

// Times are the stages' times, in the pipeline's order.
func (st *ScanStages) Times() []StageTime {
	out := make([]StageTime, stageCount)
	for i := range out {
		out[i] = StageTime{stageNames[i], time.Duration(st.ns[i].Load())}
	}
	return out
}

// add adds d to stage s, if the stages are measured.
func (st *ScanStages) add(s stage, d time.Duration) {
	if st != nil {
		st.ns[s].Add(int64(d))
	}
}

// since adds the time since began to stage s, if the stages are measured.
func (st *ScanStages) since(s stage, began time.Time) {
	if st != nil {
		st.ns[s].Add(int64(time.Since(began)))
	}
}

// parallelism is how many goroutines one scan runs.
func (s *Shards) parallelism() int {
	if s.ScanSlots != nil {
		return max(1, min(runtime.GOMAXPROCS(0), cap(s.ScanSlots)))
	}
	return runtime.GOMAXPROCS(0)
}

func (s *Shards) acquire() {
	if s.ScanSlots != nil {
		s.ScanSlots <- struct{}{}
	}
}

func (s *Shards) release() {
	if s.ScanSlots != nil {
		<-s.ScanSlots
	}
}

// DefaultScanBudget is a scan attempt's budget when neither the request
// nor the worker sets one: well within the scan's start-to-close (2 h),
// so a large repository ends an attempt cleanly, with what it did durable.
const DefaultScanBudget = 90 * time.Minute

func (s *Shards) budget(w workflows.ShardWork) time.Duration {
	switch {
	case w.MaxDuration > 0:
		return w.MaxDuration
	case s.Budget > 0:
		return s.Budget
	}
	return DefaultScanBudget
}

func (s *Shards) leaseFor() time.Duration {
	if s.LeaseFor > 0 {
		return s.LeaseFor
	}
	return time.Minute
}

func (s *Shards) logger(ctx context.Context, shardID, fence int64) *zap.Logger {
	l := s.Log
	if l == nil {
		l = zap.NewNop()
	}
	l = l.With(zap.Int64("shard", shardID), zap.Int64("fence", fence))
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With(zap.String("activity", info.ActivityType.Name), zap.Int32("attempt", info.Attempt))
	}
	return l
}

// EnsureShard creates or finds a shard and returns its id.
func (s *Shards) EnsureShard(ctx context.Context, spec shard.Spec) (int64, error) {
	id, err := s.Store.EnsureShard(ctx, spec)
	return id, AppError(err)
}

// AcquireShard claims a shard. Another owner's live lease is waited out: a
// Retryable error whose delay runs until that lease's deadline.
func (s *Shards) AcquireShard(ctx context.Context, in workflows.AcquireShardInput) (workflows.Claim, error) {
	c, err := s.Store.AcquireShard(ctx, in.ShardID, in.Owner, s.leaseFor(), in.Rearm)
	if err != nil {
		return workflows.Claim{}, AppError(err)
	}
	if c.Busy {
		e := errclass.Wrap(errclass.Retryable, "shard leased by another owner",
			fmt.Errorf("shard %d is leased by another owner until %s", in.ShardID, c.Deadline.Format(time.RFC3339)))
		e.RetryAfter = time.Until(c.Deadline) + 100*time.Millisecond
		return workflows.Claim{}, AppError(e)
	}
	if c.Status == shard.Active {
		// A new scan (a pass, an owner) starts its tally here, not in its
		// scan's first attempt: a scan placed again takes the shard over
		// at its first attempt and keeps what the owner it left made
		// durable (ScanShard).
		if err := s.Store.ResetRunTally(ctx, c.Lease); err != nil {
			return workflows.Claim{}, AppError(err)
		}
	}
	s.logger(ctx, in.ShardID, c.Lease.Fence).Info("shard claimed", zap.String("status", string(c.Status)))
	return workflows.Claim{Lease: c.Lease, Status: c.Status, ParkReason: c.ParkReason}, nil
}

// SyncShardMirror brings the shard's mirror up to date (nothing to do for
// a local repository but to check it is one) and returns the digest of the
// refs it saw, which the scan passes on so it need not sync again. It writes
// nothing durable, so it needs no fence check; a scan that lands on another
// worker syncs that worker's mirror.
func (s *Shards) SyncShardMirror(ctx context.Context, w workflows.ShardWork) (string, error) {
	if err := s.renew(ctx, w.Lease); err != nil {
		return "", AppError(err)
	}
	// The lease is held through the sync too: a slow fetch must not let it
	// lapse before the scan starts.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var p progress
	defer s.keepLease(ctx, w.Lease, &p, cancel)()
	repo, err := s.open(ctx, w.Spec, w.RefsDigest, &p)
	if lost := leaseLost(ctx); lost != nil {
		return "", AppError(lost)
	}
	if err != nil {
		return "", s.redactedError(boundUnreachable(ctx, s.UnreachableWaits, err))
	}
	return repo.refsDigest, s.redactedError(repo.Close())
}

// CheckpointShard is outer durability (see store.Checkpoint).
func (s *Shards) CheckpointShard(ctx context.Context, in workflows.CheckpointInput) (shard.Status, error) {
	st, err := s.Store.Checkpoint(ctx, in.Lease, in.ReceiptID)
	if err != nil {
		return "", AppError(err)
	}
	s.logger(ctx, in.Lease.ShardID, in.Lease.Fence).Info("shard checkpointed", zap.Int64("receipt", in.ReceiptID),
		zap.String("status", string(st)))
	return st, nil
}

// ParkShard sets a shard aside until something external changes. The
// failing scan may have been a retried attempt that took the lease over
// with a newer fence: the owner then takes the lease once more to park.
func (s *Shards) ParkShard(ctx context.Context, in workflows.ParkInput) error {
	err := s.Store.Park(ctx, in.Lease, in.Reason)
	if c := errclass.Classify(err); c != nil && c.Class == errclass.StaleOwner {
		claim, aerr := s.Store.AcquireShard(ctx, in.Lease.ShardID, in.Lease.Owner, s.leaseFor(), false)
		if aerr != nil {
			return AppError(aerr)
		}
		if claim.Status != shard.Active || claim.Busy {
			return AppError(err) // someone else owns it now: not ours to park
		}
		in.Lease = claim.Lease
		err = s.Store.Park(ctx, in.Lease, in.Reason)
	}
	if err != nil {
		return AppError(err)
	}
	s.logger(ctx, in.Lease.ShardID, in.Lease.Fence).Warn("shard parked", zap.String("reason", in.Reason))
	return nil
}

// progress is what a shard activity has done, which its heartbeats report
// (counts only), and what tells them it is alive: a step forward (a blob
// met, read, scanned or written), or a wait on something outside it (the
// database, a fetch, the presence of the findings) that has not lasted
// past its bound. A scan that neither moves nor waits stops heartbeating,
// and Temporal ends the attempt within the heartbeat timeout.
type progress struct {
	steps atomic.Int64
	// commits: the commits the walk diffed, reported for people to follow
	// (starter scan prints them); not a step, so liveness is as it was.
	commits atomic.Int64

	mu                     sync.Mutex
	Blobs, Bytes, Findings int64
	// waits are the waits in progress, alive until bound (the latest
	// bound of those that began while others were in progress).
	waits int
	bound time.Time
	// beaten is steps at the last heartbeat.
	beaten int64
}

// step counts one step forward.
func (p *progress) step() { p.steps.Add(1) }

// diffed counts one commit walked.
func (p *progress) diffed() { p.commits.Add(1) }

// add counts a durable write of blobs.
func (p *progress) add(blobs, bytes, findings int64) {
	p.mu.Lock()
	p.Blobs, p.Bytes, p.Findings = p.Blobs+blobs, p.Bytes+bytes, p.Findings+findings
	p.mu.Unlock()
	p.step()
}

// wait marks a wait on something outside the activity, alive for at most
// bound; done ends it (and counts as a step: it answered).
func (p *progress) wait(bound time.Duration) (done func()) {
	now := time.Now()
	p.mu.Lock()
	if p.waits == 0 || p.bound.Before(now.Add(bound)) {
		p.bound = now.Add(bound)
	}
	p.waits++
	p.mu.Unlock()
	return sync.OnceFunc(func() {
		p.mu.Lock()
		p.waits--
		p.mu.Unlock()
		p.step()
	})
}

// alive says whether the activity moved since the last call that said so,
// or is in a wait within its bound, and returns the counts to report.
func (p *progress) alive(now time.Time) (map[string]int64, bool) {
	steps := p.steps.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	moved := steps != p.beaten
	p.beaten = steps
	waiting := p.waits > 0 && now.Before(p.bound)
	return map[string]int64{"blobs": p.Blobs, "bytes": p.Bytes, "findings": p.Findings, "steps": steps,
		"commits": p.commits.Load()}, moved || waiting
}

// Bounds of the waits a shard activity is still alive in (see progress).
const (
	// dbWait: one database statement, however slow the database is. (A
	// scan's statements wait behind each other for the shard row: a batch
	// write and a lease renewal.)
	dbWait = 5 * time.Minute
	// syncWait: fetching an explicit commit the mirror lacks.
	syncWait = 30 * time.Minute
	// presenceWait: reading the tips' trees for the findings.
	presenceWait = 30 * time.Minute
)

// keepLease keeps an activity's claim while it works: it heartbeats every
// third of the heartbeat timeout as long as the activity is alive (see
// progress), never waiting for the database, and renews the lease every
// third of the lease on a goroutine of its own. Losing the lease (another
// owner took over) cancels ctx's work through lost at once.
func (s *Shards) keepLease(ctx context.Context, lease shard.Lease, p *progress, lost context.CancelCauseFunc) (stop func()) {
	stopBeats := tick(ctx, s.heartbeatEvery(ctx), func() bool {
		if details, ok := p.alive(time.Now()); ok {
			s.heartbeat(ctx, details)
		}
		return true
	})
	stopRenewals := tick(ctx, s.leaseFor()/3, func() bool {
		if _, err := s.Store.RenewLease(ctx, lease, s.leaseFor()); err != nil && errclass.Classify(err).Class == errclass.StaleOwner {
			lost(err)
			return false
		}
		// Any other failure is a database hiccup: the next renewal tries
		// again; the lease is ours until someone takes it over, and the
		// fence check in every write keeps us honest.
		return true
	})
	return func() { stopBeats(); stopRenewals() }
}

// leaseLost is the StaleOwner error with which keepLease cancelled ctx
// when another owner took the shard over, or nil. Any other end of ctx —
// the attempt cancelled, or ended by Temporal while the worker was stopped
// (the SDK cancels with its heartbeat's error) — is an interruption, said
// by ctx.Err().
func leaseLost(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && errclass.Classify(cause).Class == errclass.StaleOwner {
		return cause
	}
	return nil
}

// renew renews the lease at the start of an attempt: the attempt may have
// waited in the task queue past the lease's deadline, and goes on if
// nobody took the shard over meanwhile (StaleOwner if someone did).
func (s *Shards) renew(ctx context.Context, lease shard.Lease) error {
	_, err := s.Store.RenewLease(ctx, lease, s.leaseFor())
	return err
}

func (s *Shards) heartbeat(ctx context.Context, details map[string]int64) {
	switch {
	case s.Heartbeat != nil:
		s.Heartbeat(ctx, details)
	case activity.IsActivity(ctx):
		activity.RecordHeartbeat(ctx, details)
	}
}

func (s *Shards) heartbeatEvery(ctx context.Context) time.Duration {
	if s.HeartbeatEvery > 0 {
		return s.HeartbeatEvery
	}
	if activity.IsActivity(ctx) {
		if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
			return hb / 3
		}
	}
	return 3 * time.Second
}
