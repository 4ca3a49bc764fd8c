package workflows

import (
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/errclass"
)

// PropagateSnapshotWorkflowID is the id of a snapshot's propagation: one
// per snapshot at a time, whoever asks (conflict policy use-existing).
func PropagateSnapshotWorkflowID(name string) string { return "snapshot:" + name }

// PropagateSignal tells a running propagation that rows were added or reset
// (a runner joined, a retry is due): it looks again before it finishes.
const PropagateSignal = "propagate"

// PropagateSnapshotInput names the snapshot; the rest tunes the spread.
type PropagateSnapshotInput struct {
	Name   string     `json:"name"`
	Timing PullTiming `json:"timing,omitzero"`
	// Fanout bounds the pulls one ready runner serves at once (default 3).
	Fanout int `json:"fanout,omitempty"`
	// RegistrySlots bounds the pulls from the registry while no runner
	// holds the image (default 1: the registry sends one copy).
	RegistrySlots int `json:"registrySlots,omitempty"`
	// Carried is what the runs this one continued did.
	Carried *PropagateSnapshotResult `json:"carried,omitempty"`
}

// PropagateSnapshotResult says what a propagation did.
type PropagateSnapshotResult struct {
	Digest string `json:"digest,omitempty"`
	// Ready and Failed count the rows this run moved.
	Ready  int `json:"ready"`
	Failed int `json:"failed"`
	// FromRegistry and FromPeers count the bytes the runners fetched.
	FromRegistry int64 `json:"fromRegistry"`
	FromPeers    int64 `json:"fromPeers"`
	// Reason is why no runner holds the snapshot, when none does.
	Reason string `json:"reason,omitempty"`
}

// PropagateSnapshot puts a snapshot on every eligible runner (architecture §7):
// a row per runner (a duplicate is not an error), the build first for a
// snapshot made from a repository (on the repository's owner worker, from
// its mirror, pushed to the registry), then pulls on each runner's own task
// queue, sourced by a snapshot.Planner so that the registry sends about one
// copy and ready runners serve the rest. Each row ends ready or in error
// with a reason; the snapshot is active once one runner holds it. A
// snapshot that every runner failed to take for a reason no retry will
// change (no such image, over every quota, a commit that is not there)
// leaves nothing behind: it is deleted and the workflow fails Permanent.
func PropagateSnapshot(ctx workflow.Context, in PropagateSnapshotInput) (PropagateSnapshotResult, error) {
	p := &propagation{in: in, t: in.Timing.withDefaults(), planner: snapshot.NewPlanner(in.Fanout, in.RegistrySlots)}
	if in.Fanout <= 0 {
		p.planner = snapshot.NewPlanner(3, in.RegistrySlots)
	}
	if in.Carried != nil {
		p.res, p.carried = *in.Carried, *in.Carried
	}
	continues := workflow.GetVersion(ctx, "propagate-continue-as-new", workflow.DefaultVersion, 1) >= 1
	p.buildBudget = workflow.GetVersion(ctx, "build-budget", workflow.DefaultVersion, 1) >= 1
	p.busyWaits = workflow.GetVersion(ctx, "busy-is-not-offline", workflow.DefaultVersion, 1) >= 1
	p.ownerBuilds = workflow.GetVersion(ctx, "build-on-owner", workflow.DefaultVersion, 1) >= 1
	p.silentIsOffline = version(ctx, silentIsOfflineChange, 1) >= 1
	p.durableBytes = version(ctx, durableBytesChange, 1) >= 1
	p.pipelined = version(ctx, pipelinedChange, 1) >= 1
	// A signal asks for one more look after the round in progress; the
	// signals that started the run are answered by its first round.
	signals := workflow.GetSignalChannel(ctx, PropagateSignal)
	for more := true; more; {
		for signals.ReceiveAsync(nil) {
		}
		if err := p.round(ctx); err != nil {
			return p.res, err
		}
		more = signals.Len() > 0
		if more && continues && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// Signals keep coming and the history is long: the next run's
			// first round answers the signals drained here (one that
			// arrives meanwhile fails this task, which then drains it too).
			for signals.ReceiveAsync(nil) {
			}
			if err := p.countBytes(ctx); err != nil {
				return p.res, err
			}
			next := in
			next.Carried = &p.res
			return p.res, workflow.NewContinueAsNewError(ctx, PropagateSnapshot, next)
		}
	}
	if err := p.countBytes(ctx); err != nil {
		return p.res, err
	}
	switch {
	case p.active:
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Snapshot %s: %d runners made ready, %d failed", in.Name, p.res.Ready, p.res.Failed))
	case p.removing:
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Snapshot %s is being removed", in.Name))
	default:
		p.res.Reason = p.lastReason
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Snapshot %s is on no runner yet: %s (the reconcile retries)", in.Name, p.lastReason))
	}
	return p.res, nil
}

type propagation struct {
	in      PropagateSnapshotInput
	t       PullTiming
	planner *snapshot.Planner
	snap    snapshot.Snapshot
	res     PropagateSnapshotResult
	// carried is what the runs this one continued did.
	carried PropagateSnapshotResult
	// pulled: this run started a pull.
	pulled bool

	active, removing bool
	// buildBudget: builds have their own budget and failure reasons
	// (version 1 of "build-budget").
	buildBudget bool
	// busyWaits: a pull no slot took within the queue bound asks the
	// runner's admin queue whether it is alive (version 1 of
	// "busy-is-not-offline").
	busyWaits bool
	// ownerBuilds: a snapshot from a repository is built on the
	// repository's owner worker, from its mirror, and every runner pulls
	// it (version 1 of "build-on-owner"; before, one runner built it).
	ownerBuilds bool
	// silentIsOffline: a pull no slot took whose runner has not
	// heartbeated within the freshness bound is the runner's offline at
	// once; only a runner still heartbeating is asked on its admin queue
	// (version 1 of silentIsOfflineChange; before, a dead runner's pull
	// waited a second queue bound for that answer).
	silentIsOffline bool
	// durableBytes: the bytes a run's pulls received are what their
	// attempts recorded durably (PullBytes), every attempt's to its last
	// write; before, the succeeding attempt's result, which carried the
	// earlier ones' only as far as their last heartbeat reached Temporal
	// (version 1 of durableBytesChange).
	durableBytes bool
	// pipelined: a runner is a source for the pulls after it as soon as
	// its own pull starts, since it serves what it has verified while
	// still pulling (version 1 of pipelinedChange; before, only once
	// ready, so each level of the tree waited for a whole image).
	pipelined bool
	// permanent is the first failure no retry will change; lastReason the
	// latest failure of any kind; transient says whether one may change.
	permanent, lastReason string
	transient             bool
}

// round takes every row waiting for a pull to ready or error.
func (p *propagation) round(ctx workflow.Context) error {
	dctx := withOptions(ctx, dbOptions)
	if err := workflow.ExecuteActivity(dctx, activityLoadSnapshot, p.in.Name).Get(ctx, &p.snap); err != nil {
		return err
	}
	p.res.Digest = p.snap.Digest
	p.active = p.snap.State == snapshot.Active
	if p.removing = p.snap.State == snapshot.Removing; p.removing {
		return nil
	}
	var fleet Fleet
	if err := workflow.ExecuteActivity(dctx, activityPrepareSnapshotRunners, PrepareRunnersInput{Snapshot: p.in.Name, Fresh: p.t.Fresh}).Get(ctx, &fleet); err != nil {
		return err
	}
	for _, id := range fleet.Ready {
		p.planner.Ready(id)
	}
	pending := fleet.ToPull
	if fleet.Rows == 0 && !p.active {
		return p.abandon(ctx, "no runner is ready to take it (see 'starter runner list')")
	}
	if p.snap.Digest == "" && len(pending) > 0 {
		if p.snap.Kind == snapshot.KindRepo && p.ownerBuilds {
			if err := p.buildOnOwner(ctx, pending[0]); err != nil {
				return err
			}
			if p.snap.Digest == "" { // the build failed: nothing to pull
				return p.settle(ctx)
			}
			// The pulls' windows start now: the build's time was its own.
			now := workflow.Now(ctx)
			for i := range pending {
				pending[i].UpdatedAt = now
			}
		} else if p.snap.Kind == snapshot.KindRepo {
			if err := p.build(ctx, pending[0], fleet.Runners); err != nil {
				return err
			}
			pending = pending[1:]
			if p.snap.Digest == "" { // the build failed: nothing to pull
				return p.settle(ctx)
			}
		} else if err := p.setState(ctx, snapshot.Pulling, ""); err != nil {
			return err
		}
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Pulling snapshot %s to %d runners", p.in.Name, len(pending)))

	sel := workflow.NewSelector(ctx)
	inflight := 0
	var failed error
	for len(pending) > 0 || inflight > 0 {
		for len(pending) > 0 {
			peer, ok := p.planner.Assign()
			if !ok {
				break
			}
			row := pending[0]
			pending = pending[1:]
			inflight++
			p.pulled = true
			f := p.pull(ctx, row, peer, fleet.Runners)
			if p.pipelined {
				p.planner.Pulling(row.RunnerID)
			}
			sel.AddFuture(f, func(f workflow.Future) {
				inflight--
				p.planner.Release(peer)
				var r PullResult
				pullErr := f.Get(ctx, &r)
				if pullErr != nil && p.pipelined {
					p.planner.Failed(row.RunnerID)
				}
				if err := p.finish(ctx, row, pullErr, r); err != nil && failed == nil {
					failed = err
				}
			})
		}
		sel.Select(ctx)
		if failed != nil {
			return failed
		}
	}
	return p.settle(ctx)
}

// pull starts one runner's pull, bounded by what is left of the row's
// window.
func (p *propagation) pull(ctx workflow.Context, row snapshot.Row, peer string, runners map[string]snapshot.Runner) workflow.Future {
	left := row.UpdatedAt.Add(p.t.Window).Sub(workflow.Now(ctx))
	if left <= 0 {
		f, set := workflow.NewFuture(ctx)
		set.SetError(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil))
		return f
	}
	in := PullInput{Snapshot: p.in.Name, Ref: p.snap.PullRef()}
	if peer != "" {
		in.Peers = []Peer{{RunnerID: peer, Addr: runners[peer].PeerAddr}}
	}
	if !p.busyWaits {
		return workflow.ExecuteActivity(withOptions(ctx, p.t.runnerOptions(row.RunnerID, left)), activityPullSnapshot, in)
	}
	// A pull that no slot took within the queue bound is the runner's
	// only if the runner is gone: one that answers on its admin queue is
	// busy with other pulls, and the pull waits for a slot again, within
	// its window.
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var r PullResult
			err := workflow.ExecuteActivity(withOptions(ctx, p.t.runnerOptions(row.RunnerID, left)), activityPullSnapshot, in).Get(ctx, &r)
			left = row.UpdatedAt.Add(p.t.Window).Sub(workflow.Now(ctx))
			if !isScheduleToStart(err) || left <= 0 || !p.alive(ctx, row.RunnerID) {
				set.Set(r, err)
				return
			}
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Runner %s is busy: the pull of %s waits for a slot", row.RunnerID, p.in.Name))
		}
	})
	return f
}

// pipelinedChange: a runner whose pull started is a source for the next
// pulls (snapshot.Planner.Pulling): it serves the manifest and every blob
// it has verified while still pulling, streams a blob it is receiving
// short of its last byte until verified, and holds a request for a blob
// it will fetch (ocistore.PeerHandler), so the fan-out overlaps the
// registry's transfer instead of waiting a whole image per level.
const pipelinedChange = "pipelined-fanout"

// silentIsOfflineChange: a pull no slot took on a runner silent past the
// freshness bound ends "runner offline" at the queue bound, not after a
// second one spent asking its admin queue.
const silentIsOfflineChange = "silent-runner-offline"

// alive asks whether a runner that took no pull within the queue bound is
// still there. One that has not heartbeated within the freshness bound
// (the database's clock) is not: a runner killed mid-pull or before it
// took it is declared offline at the queue bound. One still heartbeating
// may be busy (every slot taken by pulls) or cut off from Temporal: its
// admin queue, whose slots no pull takes, is asked for a sign of life
// within the queue bound.
func (p *propagation) alive(ctx workflow.Context, runnerID string) bool {
	if p.silentIsOffline {
		var heard bool
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityRunnerHeard,
			RunnerHeardInput{RunnerID: runnerID, Within: p.t.Fresh}).Get(ctx, &heard)
		if err == nil && !heard {
			return false
		}
	}
	o := runnerAdminOptions(runnerID, p.t.Queue)
	o.RetryPolicy = retryPolicy(1)
	return workflow.ExecuteActivity(withOptions(ctx, o), activityListSnapshotImagesPage, PageInput{Limit: 1}).Get(ctx, nil) == nil
}

// isScheduleToStart reports whether an activity failed because nothing
// picked it up within its schedule-to-start bound.
func isScheduleToStart(err error) bool {
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// finish records one pull's outcome on its row.
func (p *propagation) finish(ctx workflow.Context, row snapshot.Row, pullErr error, r PullResult) error {
	key := RowKey{RunnerID: row.RunnerID, Snapshot: p.in.Name}
	if pullErr != nil {
		return p.fail(ctx, key, pullErr)
	}
	if !p.durableBytes {
		for src, n := range r.BySource {
			if src == snapshot.Registry {
				p.res.FromRegistry += n
			} else {
				p.res.FromPeers += n
			}
		}
	}
	if p.snap.Digest == "" {
		if err := p.record(ctx, p.snap.ImageRef, r.Digest); err != nil {
			return err
		}
	}
	return p.ready(ctx, key, []snapshot.RowState{snapshot.RowPulling}, &r)
}

// durableBytesChange: a propagation's byte counts are its pulls' durable
// per-attempt counts (PullBytes), not what the last attempt's result
// carried.
const durableBytesChange = "durable-pull-bytes"

// countBytes sets the run's byte counts to what its pulls' attempts
// recorded, added to the counts carried from the runs it continued.
func (p *propagation) countBytes(ctx workflow.Context) error {
	if !p.durableBytes || !p.pulled {
		return nil
	}
	var b PullBytes
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityPullBytes, workflow.GetInfo(ctx).WorkflowExecution.RunID).Get(ctx, &b); err != nil {
		return err
	}
	p.res.FromRegistry, p.res.FromPeers = p.carried.FromRegistry+b.Registry, p.carried.FromPeers+b.Peers
	return nil
}

// build makes the image on one runner, which then holds it ready (before
// "build-on-owner").
func (p *propagation) build(ctx workflow.Context, row snapshot.Row, runners map[string]snapshot.Runner) error {
	key := RowKey{RunnerID: row.RunnerID, Snapshot: p.in.Name}
	if err := p.transition(ctx, key, []snapshot.RowState{snapshot.RowPulling}, snapshot.RowBuilding, ""); err != nil {
		return err
	}
	if err := p.setState(ctx, snapshot.Building, ""); err != nil {
		return err
	}
	repo, err := repoid.Parse(p.snap.Repo, "")
	if err != nil {
		return p.abandon(ctx, err.Error())
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Building snapshot %s from %s@%.12s on runner %s", p.in.Name, p.snap.Repo, p.snap.Commit, row.RunnerID))
	opts := p.t.runnerOptions(row.RunnerID, p.t.Window)
	opts.HeartbeatTimeout = p.t.buildHeartbeat()
	if p.buildBudget {
		opts = p.t.buildOptions(row.RunnerID)
	}
	var r BuildResult
	err = workflow.ExecuteActivity(withOptions(ctx, opts), activityBuildSnapshot, BuildInput{
		Snapshot: p.in.Name, Repo: repo, ExternalID: p.snap.ExternalID, Commit: p.snap.Commit, BaseImage: p.snap.BaseImage,
	}).Get(ctx, &r)
	if err != nil && p.buildBudget {
		reason, permanent := buildFailureReason(err)
		return p.failWith(ctx, key, reason, permanent)
	}
	if err != nil {
		return p.fail(ctx, key, err)
	}
	if err := p.record(ctx, r.ImageRef, r.Digest); err != nil {
		return err
	}
	return p.ready(ctx, key, []snapshot.RowState{snapshot.RowBuilding}, nil)
}

// buildOnOwner builds the image on the repository's owner worker, from
// its mirror (architecture §2, "Repository affinity"), placed as a
// collection's Git work is, and records it for the runners to pull. A
// failed build is row's (the first runner waiting for the snapshot), as
// it was when that runner built: the row shows the reason, and the
// reconcile retries it as a build, a bounded number of times.
func (p *propagation) buildOnOwner(ctx workflow.Context, row snapshot.Row) error {
	key := RowKey{RunnerID: row.RunnerID, Snapshot: p.in.Name}
	if err := p.setState(ctx, snapshot.Building, ""); err != nil {
		return err
	}
	repo, err := repoid.Parse(p.snap.Repo, "")
	if err != nil {
		return p.abandon(ctx, err.Error())
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Building snapshot %s from %s@%.12s on the repository's worker", p.in.Name, p.snap.Repo, p.snap.Commit))
	var r BuildResult
	err = runGit(ctx, &GitPlace{Repo: &repo}, p.t.ownerBuildOptions(), activityBuildSnapshotFromMirror, BuildInput{
		Snapshot: p.in.Name, Repo: repo, ExternalID: p.snap.ExternalID, Commit: p.snap.Commit, BaseImage: p.snap.BaseImage,
	}, &r)
	if err != nil {
		reason, permanent := buildFailureReason(err)
		return p.failWith(ctx, key, reason, permanent)
	}
	if err := p.record(ctx, r.ImageRef, r.Digest); err != nil {
		return err
	}
	return p.setState(ctx, snapshot.Pulling, "")
}

func (p *propagation) record(ctx workflow.Context, ref, digest string) error {
	err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityRecordSnapshotImage,
		RecordImageInput{Name: p.in.Name, ImageRef: ref, Digest: digest}).Get(ctx, nil)
	if err != nil {
		return err
	}
	p.snap.ImageRef, p.snap.Digest, p.res.Digest = ref, digest, digest
	return nil
}

// ready moves a row to ready; the first ready row activates the snapshot.
// A pull's result goes with it: the row's bytes and source (a pull may end
// before the runner's own progress write lands), and the attempt's count.
func (p *propagation) ready(ctx workflow.Context, key RowKey, from []snapshot.RowState, pulled *PullResult) error {
	in := TransitionRowInput{RowKey: key, From: from, To: snapshot.RowReady}
	if pulled != nil {
		in.Size, in.Source, in.Count = pulled.Size, pulled.Source, pulled.Count
	}
	var changed bool
	err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityTransitionRow, in).Get(ctx, &changed)
	if err != nil || !changed { // not changed: removal took the row over
		return err
	}
	p.res.Ready++
	p.planner.Ready(key.RunnerID)
	if !p.active {
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityActivateSnapshot, p.in.Name).Get(ctx, nil); err != nil {
			return err
		}
		p.active = true
	}
	return nil
}

// fail records why a pull or build failed on a row.
func (p *propagation) fail(ctx workflow.Context, key RowKey, err error) error {
	reason, permanent := failureReason(err)
	return p.failWith(ctx, key, reason, permanent)
}

func (p *propagation) failWith(ctx workflow.Context, key RowKey, reason string, permanent bool) error {
	p.res.Failed++
	p.lastReason = reason
	if permanent && p.permanent == "" {
		p.permanent = reason
	}
	p.transient = p.transient || !permanent
	return p.transition(ctx, key, []snapshot.RowState{snapshot.RowPulling, snapshot.RowBuilding}, snapshot.RowError, reason)
}

// settle ends a round: a snapshot that no runner holds either waits for
// the reconcile's retries (state error, with the reason) or, when every
// failure was one no retry changes, is removed with its rows.
func (p *propagation) settle(ctx workflow.Context) error {
	if p.active || p.lastReason == "" {
		return nil
	}
	// Before version 1 a single permanent failure abandoned the snapshot
	// even when other runners had failed for a reason a retry may change.
	if p.permanent != "" && (!p.transient || workflow.GetVersion(ctx, "settle-abandons-only-permanent", workflow.DefaultVersion, 1) == workflow.DefaultVersion) {
		return p.abandon(ctx, p.permanent)
	}
	return p.setState(ctx, snapshot.Error, p.lastReason)
}

// abandon deletes a snapshot that never became active, with its rows, and
// fails the workflow Permanent.
func (p *propagation) abandon(ctx workflow.Context, reason string) error {
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityAbandonSnapshot, p.in.Name).Get(ctx, nil); err != nil {
		return err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Snapshot %s was not created: %s", p.in.Name, reason))
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("snapshot %s: %s", p.in.Name, reason), string(errclass.Permanent), nil)
}

func (p *propagation) transition(ctx workflow.Context, key RowKey, from []snapshot.RowState, to snapshot.RowState, reason string) error {
	return workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityTransitionRow,
		TransitionRowInput{RowKey: key, From: from, To: to, Reason: reason}).Get(ctx, nil)
}

func (p *propagation) setState(ctx workflow.Context, s snapshot.State, reason string) error {
	return workflow.ExecuteActivity(withOptions(ctx, dbOptions), activitySetSnapshotState,
		SetSnapshotStateInput{Name: p.in.Name, State: s, Reason: reason}).Get(ctx, nil)
}

// buildFailureReason is failureReason for a build: marked as a build's
// (snapshot.BuildFailure: the reconcile retries it a bounded number of
// times), a timeout being the build's own budget running out.
func buildFailureReason(err error) (reason string, permanent bool) {
	reason, permanent = failureReason(err)
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && timeout.TimeoutType() != enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		reason = snapshot.ReasonBuildTimeout
	}
	return snapshot.BuildFailure(reason), permanent
}

// failureReason turns a pull's or build's failure into a row's reason, and
// says whether any retry could change it.
func failureReason(err error) (reason string, permanent bool) {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			return snapshot.ReasonOffline, false
		}
		return snapshot.ReasonTimeout, false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == string(errclass.Permanent) {
		return app.Message(), true
	}
	return snapshot.TransientReason(message(err)), false
}
