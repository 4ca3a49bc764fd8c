package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/errclass"
)

// Phase is where an ExecuteShard run is inside the Active state. Phases are
// worker-local: visible in the Web UI and through the "phase" query, never
// persisted as shard status.
type Phase string

const (
	PhaseStarting          Phase = "Starting"
	PhaseClaimed           Phase = "Claimed"
	PhaseMirrorSync        Phase = "MirrorSync"
	PhaseExecuting         Phase = "Executing"
	PhaseInnerDurable      Phase = "InnerDurable"
	PhaseOuterCheckpointed Phase = "OuterCheckpointed"
)

// PhaseQuery is the query that returns an ExecuteShard run's phase.
const PhaseQuery = "phase"

// ShardWorkflowID is the id of the ExecuteShard run a scan request starts:
// identical requests share it.
func ShardWorkflowID(key string) string { return "scan:" + key }

// ExecuteShardInput names the shard to run.
type ExecuteShardInput struct {
	Spec shard.Spec `json:"spec"`
	// MaxDuration bounds one scan; what is left is picked up by the next
	// run (the result is Partial). Zero: each attempt stops at the worker's
	// budget and the run goes on in passes (see MaxPasses).
	MaxDuration time.Duration `json:"maxDuration,omitempty"`
	// RefsDigest is what the mirror sync of the job that started this run
	// saw (a Collect syncs before it resolves identity); "" means this run
	// syncs the mirror itself.
	RefsDigest string `json:"refsDigest,omitempty"`
	// Place is where the job that started this run synced the mirror (a
	// Collect's worker): the scan runs there. Empty: placed by the
	// target's location.
	Place GitPlace `json:"place,omitzero"`
}

// ExecuteShardResult is the shard's state after the run.
type ExecuteShardResult struct {
	ShardID    int64        `json:"shardId"`
	Status     shard.Status `json:"status"`
	ParkReason string       `json:"parkReason,omitempty"`
	// Receipt is the durable receipt of this run's finalize (absent when
	// the shard was not Active: already Done without new work, or Parked).
	Receipt *shard.Receipt `json:"receipt,omitempty"`
	// Owners counts leases taken: more than one means an owner went stale
	// (lost its lease) and a new one finished the work, or the scan went
	// on in another pass.
	Owners int `json:"owners"`
	// Passes counts the scans that ran out of their time budget and that
	// the next pass continued.
	Passes int `json:"passes,omitempty"`
}

// maxOwners bounds how often a run takes a new lease after losing one.
const maxOwners = 5

// MaxPasses bounds the passes of one run given no budget (MaxDuration 0,
// as Collect gives none): each attempt of its scan then stops at the
// worker's budget (activities.DefaultScanBudget, well within the scan's
// start-to-close, so that a large repository ends an attempt cleanly
// rather than time out) and finalizes what it did, and the next pass
// continues from that durable progress (seen blobs, the watermarks of the
// refs it finished). After MaxPasses the shard stays Active and the next
// run (the next cycle) continues it.
const MaxPasses = 8

// repositoryReasons are the Permanent reasons that are the repository's
// doing, the only ones a shard is parked for (with those of a repository
// over one of gitread's limits, errclass.IsLimit, or unsafe to read):
// anything else (the database's, the worker's, time running out) leaves
// the shard Active for the next run.
var repositoryReasons = map[string]bool{
	errclass.ReasonNotFound: true, errclass.ReasonPermissionDenied: true, errclass.ReasonCorrupt: true,
	errclass.ReasonEmptyRepository: true, errclass.ReasonInvalidInput: true, errclass.ReasonUnsupported: true,
	"poisoned": true,
}

var (
	// scanOptions: the scan heartbeats (a dead worker is noticed within the
	// heartbeat timeout) and retries Retryable errors within its budget.
	scanOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Hour,
		ScheduleToCloseTimeout: 6 * time.Hour,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            retryPolicy(0),
	}
	// acquireOptions: waiting for another owner's lease to end is a
	// Retryable error whose delay runs until its deadline.
	acquireOptions = func() workflow.ActivityOptions {
		o := dbOptions
		o.ScheduleToCloseTimeout = 6 * time.Hour
		return o
	}()
)

// ExecuteShard claims a shard under a lease with a fence, syncs its mirror,
// scans every blob it has not seen, finalizes findings and watermarks
// atomically, and only then checkpoints (architecture §4).
//
// How it ended is in SAOutcome and the memo. A parked shard fails the run
// (non-retryable, Permanent, its message the reason, the result in its
// details: see ParkedResult), so that `temporal workflow list` and the Web
// UI show it failed where people look; a partial scan completes (the next
// continues it). Runs recorded before parkedFailsChange complete with a
// Parked result.
func ExecuteShard(ctx workflow.Context, in ExecuteShardInput) (ExecuteShardResult, error) {
	return executeShardUnder(shardBaselines.Apply(ctx), in)
}

// executeShardUnder is ExecuteShard once ctx carries the run's baseline (a
// test replays it under a successor).
func executeShardUnder(ctx workflow.Context, in ExecuteShardInput) (ExecuteShardResult, error) {
	out, err := executeShard(ctx, in)
	switch {
	case temporal.IsCanceledError(err):
	case err != nil:
		setOutcome(ctx, OutcomeFailed, message(err))
	case out.Status == shard.Parked:
		msg := fmt.Sprintf("shard %d parked: %s", out.ShardID, out.ParkReason)
		setOutcome(ctx, OutcomeParked, msg)
		if version(ctx, parkedFailsChange, 1) == 1 {
			return out, temporal.NewApplicationErrorWithOptions(msg, string(errclass.Permanent), temporal.ApplicationErrorOptions{
				NonRetryable: true, Details: []any{out.ParkReason, out},
			})
		}
	case out.Status == shard.Active:
		setOutcome(ctx, OutcomeActive, fmt.Sprintf("shard %d: the next scan continues%s", out.ShardID, holesNote(out.Receipt)))
	default:
		setOutcome(ctx, OutcomeDone, fmt.Sprintf("shard %d is %s%s", out.ShardID, out.Status, holesNote(out.Receipt)))
	}
	return out, err
}

// recheckPlaceChange: the runs that check the place they inherited (a
// Collect's) again before their first Git work.
const recheckPlaceChange = "recheck-inherited-place"

// replacedTakesOver: the runs whose scan, placed again, takes the shard
// over with a new fence (before: it renewed the fence of the owner it
// left, and reset the run's tally).
const replacedTakesOver = "replaced-scan-takes-over"

// parkedFailsChange: the runs in which a parked shard fails the run.
const parkedFailsChange = "parked-fails-run"

// ParkedResult is the result of an ExecuteShard run that failed because it
// parked its shard (see ExecuteShard), found in the run's error.
func ParkedResult(err error) (ExecuteShardResult, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) || !app.HasDetails() {
		return ExecuteShardResult{}, false
	}
	var reason string
	var out ExecuteShardResult
	if app.Details(&reason, &out) != nil || out.Status != shard.Parked {
		return ExecuteShardResult{}, false
	}
	return out, true
}

// holesNote says what a run could not read: honestly, when it cannot be
// recovered ("" when it read everything; receipts of runs recorded before
// holes have none).
func holesNote(r *shard.Receipt) string {
	if r == nil || r.Holes+r.Lost == 0 {
		return ""
	}
	var parts []string
	if r.Holes > 0 {
		parts = append(parts, count(r.Holes, "blob", "blobs")+" unreadable, tried again by the next scan")
	}
	if r.Lost > 0 {
		parts = append(parts, count(r.Lost, "blob", "blobs")+" cannot be recovered (missing or damaged in the source)")
	}
	return "; " + strings.Join(parts, "; ")
}

func executeShard(ctx workflow.Context, in ExecuteShardInput) (ExecuteShardResult, error) {
	phase := PhaseStarting
	if err := workflow.SetQueryHandler(ctx, PhaseQuery, func() (Phase, error) { return phase, nil }); err != nil {
		return ExecuteShardResult{}, err
	}
	enter := func(p Phase, detail string) {
		phase = p
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** %s", p, detail))
	}
	out := ExecuteShardResult{}
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityEnsureShard, in.Spec).Get(ctx, &out.ShardID); err != nil {
		return out, err
	}
	owner := workflow.GetInfo(ctx).WorkflowExecution.ID + "/" + workflow.GetInfo(ctx).WorkflowExecution.RunID
	// Runs recorded before a job synced its mirror once sync here and again
	// in the scan.
	oneSync := version(ctx, "one-mirror-sync", 1) == 1
	refs := in.RefsDigest
	// Runs recorded before it park a shard whose errors outlast their
	// budget ("too many errors"), and end with the first pass.
	failureModel := version(ctx, "shard-failure-model", 1) == 1
	lost := 0       // leases lost to another owner
	var found int64 // new secrets, over the passes
	place := in.Place
	if place.Repo == nil && place.Location == "" {
		place.Location = in.Spec.Target.Location
	}
	// Runs recorded before it send their Git work to the place they
	// inherited as it was.
	inherited := place.Queue != "" && version(ctx, recheckPlaceChange, 1) == 1

	for (failureModel && lost < maxOwners) || (!failureModel && out.Owners < maxOwners) {
		var claim Claim
		err := workflow.ExecuteActivity(withOptions(ctx, acquireOptions), activityAcquireShard, AcquireShardInput{
			ShardID: out.ShardID, Owner: owner, Rearm: out.Owners == 0,
		}).Get(ctx, &claim)
		if err != nil {
			return out, err
		}
		out.Status, out.ParkReason = claim.Status, claim.ParkReason
		if claim.Status != shard.Active {
			enter(phase, fmt.Sprintf("shard %d is %s", out.ShardID, claim.Status))
			return out, nil
		}
		out.Owners++
		lease := claim.Lease
		enter(PhaseClaimed, fmt.Sprintf("shard %d, fence %d", out.ShardID, lease.Fence))
		if inherited {
			// The place the job that started this run made (its sync's
			// worker) is checked again before any Git work goes there: that
			// worker may have died since, and a worker known to be gone
			// gets no new work. An owner still live is placed as itself.
			inherited = false
			if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityPlaceGitWork, PlaceGitWorkInput{
				Repo: place.Repo, Location: place.Location, TaskQueue: workflow.GetInfo(ctx).TaskQueueName,
			}).Get(ctx, &place.Queue); err != nil {
				return out, err
			}
		}

		switch {
		case !oneSync:
			enter(PhaseMirrorSync, fmt.Sprintf("shard %d", out.ShardID))
			err = runGit(ctx, &place, gitOptions, activitySyncShardMirror, ShardWork{Lease: lease, Spec: in.Spec}, nil)
		case refs == "":
			enter(PhaseMirrorSync, fmt.Sprintf("shard %d", out.ShardID))
			err = runGit(ctx, &place, gitOptions, activitySyncShardMirror, ShardWork{Lease: lease, Spec: in.Spec}, &refs)
		default:
			enter(PhaseMirrorSync, fmt.Sprintf("shard %d: the mirror was synced by this job", out.ShardID))
		}
		if err == nil {
			enter(PhaseExecuting, fmt.Sprintf("shard %d, fence %d", out.ShardID, lease.Fence))
			var receipt shard.Receipt
			work := ShardWork{Lease: lease, Spec: in.Spec, MaxDuration: in.MaxDuration, RefsDigest: refs}
			err = runGitPlaced(ctx, &place, scanOptions, activityScanShard, func(again bool) any {
				// A scan placed again may still run on the owner it left:
				// it takes the shard over (runs recorded before replay
				// without).
				w := work
				w.TakeOver = again && version(ctx, replacedTakesOver, 1) == 1
				return w
			}, &receipt)
			if err == nil {
				out.Receipt = &receipt
				found += receipt.Findings
				// A retried scan attempt fences off the one it replaces: the
				// receipt's fence is the lease to checkpoint with.
				lease.Fence = receipt.Fence
				enter(PhaseInnerDurable, fmt.Sprintf("receipt %d: %s scanned, %s, complete=%t",
					receipt.ID, count(receipt.BlobsScanned, "blob", "blobs"), count(receipt.Findings, "new finding", "new findings"), receipt.Complete))
				err = workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityCheckpointShard, CheckpointInput{
					Lease: lease, ReceiptID: receipt.ID,
				}).Get(ctx, &out.Status)
			}
		}
		class, reason := classOf(err)
		switch {
		case err == nil && failureModel && continues(in, out):
			// The budget ended the pass, not the work: the next pass goes
			// on from what this one made durable.
			out.Passes++
			enter(PhaseOuterCheckpointed, fmt.Sprintf("shard %d: pass %d ran out of time; the next one continues", out.ShardID, out.Passes))
			continue
		case err == nil:
			enter(PhaseOuterCheckpointed, fmt.Sprintf("shard %d is %s", out.ShardID, out.Status))
			if found > 0 &&
				version(ctx, validateAfterScan, 1) == 1 && validationOn(ctx) {
				startValidation(ctx, out.ShardID, in.Spec.Key, place)
			}
			// Runs recorded before alerts replay without.
			if found > 0 && version(ctx, notifyAfterScan, 1) == 1 && notifying(ctx) {
				startNotify(ctx, NotifySecretsInput{Kind: NotifyNew, Shards: []int64{out.ShardID},
					Since: workflow.GetInfo(ctx).WorkflowStartTime.Add(-notifyScanMargin)}, in.Spec.Key)
			}
			return out, nil
		case class == errclass.StaleOwner:
			// This owner lost its lease: stop at once, no checkpoint, no
			// park. The shard stays Active; a new lease finishes it.
			workflow.GetLogger(ctx).Warn("Lease lost; taking a new one", "shard", out.ShardID, "fence", lease.Fence)
			lost++
			continue
		case !failureModel && class == errclass.Permanent:
			return park(ctx, out, lease, parkReason(reason))
		case !failureModel && isTimeout(err):
			// Retryable errors ran out their budget.
			return park(ctx, out, lease, "too many errors")
		case class == errclass.Permanent && (repositoryReasons[reason] || errclass.IsLimit(reason) || reason == errclass.ReasonUnsafe):
			return park(ctx, out, lease, reason)
		case temporal.IsCanceledError(err):
			return out, err
		default:
			// Time ran out (a queue, the database, a host that kept
			// failing), or a Permanent error that is not the repository's:
			// nothing about the repository, nothing parked. The shard stays
			// Active, and the next run continues it.
			return out, infrastructureError(out.ShardID, err)
		}
	}
	return out, temporal.NewApplicationError(fmt.Sprintf("shard %d: lost its lease %d times", out.ShardID, maxOwners),
		string(errclass.Retryable), "contention")
}

// continues says whether a run goes on with another pass: the checkpointed
// pass ran out of the run's own budget (not one the request set), got
// somewhere, and the run has passes left.
func continues(in ExecuteShardInput, out ExecuteShardResult) bool {
	r := out.Receipt
	return in.MaxDuration == 0 && out.Status == shard.Active && r != nil && r.OutOfTime &&
		r.BlobsScanned+r.BlobsSkipped > 0 && out.Passes+1 < MaxPasses
}

// infrastructureError is the error of a run that failed for a reason that
// is not the repository's: its class (a timeout is Retryable) and reason,
// saying that the shard was left for the next run.
func infrastructureError(shardID int64, err error) error {
	class, reason := classOf(err)
	if class == errclass.StaleOwner {
		class = errclass.Retryable
	}
	if isTimeout(err) {
		reason = "timed out"
	}
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("shard %d: %s; not parked: the next run continues it", shardID, message(err)), string(class),
		temporal.ApplicationErrorOptions{NonRetryable: class != errclass.Retryable, Cause: err, Details: []any{reason}})
}

func park(ctx workflow.Context, out ExecuteShardResult, lease shard.Lease, reason string) (ExecuteShardResult, error) {
	err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityParkShard, ParkInput{Lease: lease, Reason: reason}).Get(ctx, nil)
	if class, _ := classOf(err); err != nil && class != errclass.StaleOwner {
		return out, err
	}
	if err == nil {
		out.Status, out.ParkReason = shard.Parked, reason
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("shard %d parked: %s", out.ShardID, errclass.Explain(reason)))
	return out, nil
}

// parkReason maps an error reason to the reasons a shard is parked for.
// (A reason passed through here is new to a park's input only when its
// error is new: a recorded history never parked for "corrupt repository".)
func parkReason(reason string) string {
	switch reason {
	case errclass.ReasonNotFound, errclass.ReasonPermissionDenied, errclass.ReasonCorrupt:
		return reason
	}
	return "poisoned"
}

func isTimeout(err error) bool {
	var t *temporal.TimeoutError
	return errors.As(err, &t)
}

// count says "1 blob", "3 blobs".
func count[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
