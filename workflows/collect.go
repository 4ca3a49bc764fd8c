package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/blame"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/errclass"
)

// CollectInput asks for one repository to be collected.
type CollectInput struct {
	Repo repoid.ID `json:"repository"`
	// Trigger says who asked: TriggerManual (a user), TriggerSweep (the
	// schedule) or TriggerPush (a webhook delivery).
	Trigger string `json:"trigger,omitempty"`
	// PlaceWait bounds how long the repository's Git work waits for its
	// worker before it is placed again (zero: DefaultPlaceWait).
	PlaceWait time.Duration `json:"placeWait,omitempty"`
}

// CollectResult is what a collection found.
type CollectResult struct {
	Requested repoid.ID `json:"requested"`
	// Repository is where the codebase lives now (differs from Requested
	// after a rename or transfer).
	Repository    repoid.ID     `json:"repository"`
	CodebaseID    int64         `json:"codebaseId"`
	Case          identity.Case `json:"case"`
	Commit        string        `json:"commit,omitempty"`
	DefaultBranch string        `json:"defaultBranch,omitempty"`
	Empty         bool          `json:"empty,omitempty"`
	// RetiredCodebaseID is the codebase marked stale because its name now
	// holds another repository (case E).
	RetiredCodebaseID int64 `json:"retiredCodebaseId,omitempty"`
	// Attempts counts identity resolutions; more than one means a rename
	// raced the clone and resolution started over.
	Attempts int `json:"attempts"`
	// Scan is the codebase's shard after this collection's scan.
	Scan *ExecuteShardResult `json:"scan,omitempty"`
	// ScanCurrent says the collection did not scan: the repository's
	// branches, tags and the rules were those of its last, complete scan.
	ScanCurrent bool `json:"scanCurrent,omitempty"`
}

// maxResolveAttempts bounds how often a collection starts over from the
// clone because the repository moved under it.
const maxResolveAttempts = 5

// Collect mirrors a repository, resolves which codebase it is and records
// the collection. A repository whose head is its codebase's last commit is
// settled in one activity (ConfirmCodebase), which also records the
// collection when the last scan is current: its re-collection is a place,
// a sync and that step. Anything else is resolved by the child workflow
// ResolveIdentity, and scanned by the child ExecuteShard.
//
// Pushes (PushedSignal, from webhook deliveries) that arrive while it runs
// are coalesced into one more run: however many arrived, the run continues
// as new once, and that run fetches after all of them.
func Collect(ctx workflow.Context, in CollectInput) (CollectResult, error) {
	ctx = collectBaselines.Apply(ctx)
	pushes := workflow.GetSignalChannel(ctx, PushedSignal)
	// The pushes that started this run, or met it before it ran its first
	// step, are before its sync: it fetches what they pushed.
	drain(pushes)
	out, err := collectUnder(ctx, in)
	if n := drain(pushes); n > 0 && !temporal.IsCanceledError(err) && version(ctx, pushFollowUp, 1) == 1 {
		workflow.GetLogger(ctx).Info("Pushes arrived during the collection: collecting once more", "pushes", n)
		return out, workflow.NewContinueAsNewError(ctx, Collect, CollectInput{Repo: in.Repo, Trigger: TriggerPush, PlaceWait: in.PlaceWait})
	}
	return out, err
}

// PushedSignal is what a webhook delivery sends a repository's collection
// (SignalWithStart on CollectWorkflowID: it starts one when none runs): a
// push, or a branch or tag created or deleted.
const PushedSignal = "pushed"

// Pushed is PushedSignal's payload: which delivery, for the history.
type Pushed struct {
	Delivery string `json:"delivery"` // X-GitHub-Delivery
	Event    string `json:"event"`
	After    string `json:"after,omitempty"` // the pushed commit, when the event names one
}

// Triggers of a collection (CollectInput.Trigger).
const (
	TriggerManual = "manual"
	TriggerSweep  = "sweep"
	TriggerPush   = "push"
)

// pushFollowUp: the runs that collect once more when pushes arrived while
// they ran. Only a run that received a push reaches it.
const pushFollowUp = "push-follow-up"

// drain takes every signal waiting on ch and says how many there were.
func drain(ch workflow.ReceiveChannel) int {
	n := 0
	for ch.ReceiveAsync(nil) {
		n++
	}
	return n
}

// collectUnder is Collect once ctx carries the run's baseline (a test
// replays it under a successor).
func collectUnder(ctx workflow.Context, in CollectInput) (CollectResult, error) {
	info := workflow.GetInfo(ctx)
	key := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID
	out := CollectResult{Requested: in.Repo}

	// A person asking again clears the failure streak that took the
	// repository out of automatic refresh.
	if version(ctx, "manual-resets-failures", 1) == 1 && in.Trigger == TriggerManual {
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityResetFailures, in.Repo).Get(ctx, nil); err != nil {
			return out, fail(ctx, key, in.Repo, "reset failures", err)
		}
	}

	var resolved ResolveIdentityResult
	var synced SyncMirrorResult
	// confirmed: the sync proved the codebase (ConfirmCodebase), and
	// recorded: the collection is recorded with it.
	var confirmed, recorded bool
	// Where the repository is fetched from: the request, unless the API
	// said it moved after git refused the name.
	from := in.Repo
	place := GitPlace{Repo: &in.Repo, Wait: in.PlaceWait}
	for {
		out.Attempts++
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Syncing the mirror of %s (attempt %d)", from, out.Attempts))
		if err := runGit(ctx, &place, gitOptions, activitySyncMirror, from, &synced); err != nil {
			moved, err := refused(ctx, from, err)
			if moved == nil || out.Attempts >= maxResolveAttempts {
				if err == nil {
					err = temporal.NewApplicationError(fmt.Sprintf("%s kept moving: git refused it at %s", in.Repo, *moved),
						string(errclass.Retryable), errclass.ReasonRace)
				}
				return out, fail(ctx, key, in.Repo, "sync mirror", err)
			}
			workflow.GetLogger(ctx).Info("Git refused the name; the API says the repository moved", "from", from, "to", *moved)
			from = *moved
			place = GitPlace{Repo: moved, Wait: in.PlaceWait}
			continue
		}
		out.Commit, out.DefaultBranch, out.Empty = synced.Head, synced.DefaultBranch, synced.Empty

		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Resolving the identity of %s", synced.Cloned))
		var known ConfirmCodebaseResult
		looked := version(ctx, confirmChange, 1) == 1
		if looked {
			err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityConfirmCodebase, ConfirmCodebaseInput{
				Key: key, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
				Cloned: synced.Cloned, Head: synced.Head, DefaultBranch: synced.DefaultBranch, RefsDigest: synced.RefsDigest,
			}).Get(ctx, &known)
			if err != nil {
				return out, fail(ctx, key, in.Repo, "resolve identity", err)
			}
			if known.Confirmed != nil {
				resolved, confirmed, recorded = *known.Confirmed, true, known.Recorded
				break
			}
		}
		child := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			// Derived from the input, not the run: stable under replay.
			WorkflowID: CollectWorkflowID(in.Repo) + "/identity",
			Memo:       map[string]any{"repository": in.Repo.String()},
		})
		err := workflow.ExecuteChildWorkflow(child, ResolveIdentity, ResolveIdentityInput{
			Key: key, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			Cloned: synced.Cloned, Head: synced.Head, DefaultBranch: synced.DefaultBranch, ClonedAt: synced.StartedAt,
			RefsDigest: synced.RefsDigest, Place: place, Known: known.ByName, Looked: looked,
		}).Get(ctx, &resolved)
		if err == nil {
			break
		}
		if class, _ := classOf(err); class != errclass.Retryable || out.Attempts >= maxResolveAttempts {
			return out, fail(ctx, key, in.Repo, "resolve identity", err)
		}
		// The repository moved between clone and lookup (or rows moved
		// under a concurrent collection): start over from the clone.
		workflow.GetLogger(ctx).Warn("Identity resolution starts over", "attempt", out.Attempts, "error", err)
		// A cancel during the pause ends the collection (runs recorded
		// before went on to the next sync, which the cancel then failed).
		if err := workflow.Sleep(ctx, time.Duration(out.Attempts)*time.Second); err != nil &&
			version(ctx, collectCancelChange, 1) == 1 {
			return out, fail(ctx, key, in.Repo, "resolve identity", err)
		}
	}
	out.CodebaseID, out.Case, out.RetiredCodebaseID = resolved.CodebaseID, resolved.Case, resolved.RetiredCodebaseID
	out.Repository = repoid.ID{Host: in.Repo.Host, Owner: resolved.Owner, Name: resolved.Name}

	// Runs recorded before collections scanned for secrets replay without it.
	if version(ctx, "scan-after-identity", 1) == 1 && !out.Empty {
		out.ScanCurrent = recorded || (!confirmed && scanCurrent(ctx, out, synced.RefsDigest))
		if !out.ScanCurrent {
			if err := scanCodebase(ctx, &out, synced.RefsDigest, place); err != nil {
				return out, fail(ctx, key, in.Repo, "scan", err)
			}
		}
	}

	if !recorded {
		workflow.SetCurrentDetails(ctx, "Recording the collection")
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityCompleteCollection, CompleteCollectionInput{
			Key: key, CodebaseID: out.CodebaseID, Commit: out.Commit, RefsDigest: synced.RefsDigest,
		}).Get(ctx, nil)
		if err != nil {
			return out, fail(ctx, key, in.Repo, "record collection", err)
		}
	}
	// Runs recorded before never uploaded to code scanning.
	if !out.Empty && version(ctx, codeScanningChange, 1) == 1 {
		uploadAfterCollect(ctx, out, synced.CodeScanning)
	}
	if version(ctx, confirmChange, 1) == 1 {
		// One upsert of what the Web UI shows; the result holds the rest.
		_ = workflow.UpsertTypedSearchAttributes(ctx, SACase.ValueSet(string(out.Case)), SACodebase.ValueSet(out.CodebaseID),
			SAOutcome.ValueSet(OutcomeCollected))
	} else {
		_ = workflow.UpsertTypedSearchAttributes(ctx, SACase.ValueSet(string(out.Case)), SACodebase.ValueSet(out.CodebaseID))
		setOutcome(ctx, OutcomeCollected, fmt.Sprintf("case %s (%s), codebase %d, at %s", out.Case, out.Case.Describe(), out.CodebaseID, out.Repository))
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Collected %s: case %s (%s), codebase %d",
		out.Repository, out.Case, out.Case.Describe(), out.CodebaseID))
	return out, nil
}

// refused handles a mirror sync that git refused (404, or the 401 an
// anonymous request gets for an unknown or private repository): the API
// says what it means (identity.ExplainRefusal) — the codebase's repository
// is gone (marked stale), it cannot be read (private, or deleted and the API
// cannot tell: kept as inaccessible), it moved (the returned name, to sync
// next: resolved as D), or the name is unknown. A verdict about the
// repository fails Permanent with its blame reason, which counts against the
// repository; a refusal the API could not explain returns err unchanged,
// which does not (the API, the token or the host may be what failed). Other
// errors, and runs recorded before this, return err unchanged.
func refused(ctx workflow.Context, repo repoid.ID, err error) (*repoid.ID, error) {
	class, reason := classOf(err)
	if class != errclass.Permanent || (reason != errclass.ReasonNotFound && reason != errclass.ReasonPermissionDenied) {
		return nil, err
	}
	if version(ctx, "refused-asks-api", 1) == workflow.DefaultVersion {
		return nil, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Git refused %s: asking the API why", repo))
	var r RefusalResult
	if aerr := workflow.ExecuteActivity(withOptions(ctx, apiOptions), activityExplainRefusal, repo).Get(ctx, &r); aerr != nil {
		workflow.GetLogger(ctx).Warn("Could not ask the API why git refused the repository", "error", aerr)
		if version(ctx, unexplainedChange, 1) == workflow.DefaultVersion {
			return nil, err
		}
		// Said where the user looks (the run's failure, the recorded
		// collection, starter show): a rejected GITHUB_TOKEN or App token
		// hides every deletion until it is replaced. Class and reason stay
		// git's: nobody is charged for it.
		class, reason := classOf(err)
		return nil, temporal.NewApplicationError(fmt.Sprintf("%s; the API could not say why: %s", message(err), message(aerr)),
			string(class), reason)
	}
	reason = errclass.ReasonPermissionDenied
	switch r.Refusal {
	case identity.RefusedMoved:
		if r.MovedTo != nil {
			return r.MovedTo, nil
		}
	case identity.RefusedGone:
		reason = blame.ReasonGone
	case identity.RefusedInaccessible:
		reason = blame.ReasonInaccessible
	case identity.RefusedPrivate:
		reason = blame.ReasonPrivate
	case identity.RefusedNotFound:
		reason = errclass.ReasonNotFound
	}
	return nil, temporal.NewApplicationError(r.Message, string(errclass.Permanent), reason)
}

// scanCurrent reports whether a re-collection (case B) may skip its scan
// child, its shard's four activities and their search-attribute updates:
// the branches, tags and rules are those of the codebase's last, complete
// scan. Any doubt (the check failed) scans. Runs recorded before
// (version skip-current-scan) always scanned.
func scanCurrent(ctx workflow.Context, out CollectResult, refsDigest string) bool {
	if version(ctx, "skip-current-scan", 1) == workflow.DefaultVersion ||
		out.Case != identity.CaseSame || refsDigest == "" {
		return false
	}
	var needed bool
	err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityScanNeeded,
		ScanNeededInput{CodebaseID: out.CodebaseID, RefsDigest: refsDigest}).Get(ctx, &needed)
	return err == nil && !needed
}

// scanCodebase runs the codebase's shard (ExecuteShard, a child) after its
// identity is settled, on the mirror the collection synced (refsDigest),
// on the worker that synced it (place). A
// parked shard fails the collection as Permanent.
func scanCodebase(ctx workflow.Context, out *CollectResult, refsDigest string, place GitPlace) error {
	var spec shard.Spec
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityCodebaseShard, out.CodebaseID).Get(ctx, &spec); err != nil {
		return err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Scanning codebase %d", out.CodebaseID))
	child := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: CollectWorkflowID(out.Requested) + "/scan",
		Memo:       map[string]any{"repository": out.Requested.String(), "target": spec.Target.Location},
	})
	var res ExecuteShardResult
	if err := workflow.ExecuteChildWorkflow(child, ExecuteShard, ExecuteShardInput{Spec: spec, RefsDigest: refsDigest, Place: place}).Get(ctx, &res); err != nil {
		parked, ok := ParkedResult(err) // a child that parked fails its run
		if !ok {
			return err
		}
		res = parked
	}
	out.Scan = &res
	if res.Status == shard.Parked {
		return temporal.NewApplicationError(fmt.Sprintf("the scan of codebase %d is parked: %s", out.CodebaseID, res.ParkReason),
			string(errclass.Permanent), res.ParkReason)
	}
	return nil
}

// confirmChange: the runs that confirm an unchanged repository in one
// activity (ConfirmCodebase) — no ResolveIdentity child, and no
// CompleteCollection when the scan is current — and that set what the Web
// UI shows in one upsert at the end.
const confirmChange = "confirm-codebase"

// unexplainedChange: the runs whose failure, when git refused the
// repository and the API could not say why (a rejected token, the API
// down), says what the API answered; runs recorded before failed with
// git's refusal alone.
const unexplainedChange = "refusal-unexplained-says-why"

// collectCancelChange: the runs in which a cancel is a cancel — recorded as
// cancelled, charged to nobody, ending the run as cancelled — and in which
// a cancel during the pause before resolving again ends the run.
const collectCancelChange = "collect-cancel"

// fail records the failed collection and returns the workflow's error: an
// ApplicationError of the same class, with a message that says what failed.
// The failure counts against the repository only when it is the
// repository's own doing (blame.Strikes). A cancel is recorded as cancelled
// and returns the cancel (see cancelled).
func fail(ctx workflow.Context, key string, repo repoid.ID, step string, cause error) error {
	if (ctx.Err() != nil || temporal.IsCanceledError(cause)) &&
		version(ctx, collectCancelChange, 1) == 1 {
		return cancelled(ctx, key, repo, step, cause)
	}
	class, reason := classOf(cause)
	msg := fmt.Sprintf("collect %s: %s: %s", repo, step, message(cause))
	record(ctx, FailCollectionInput{Key: key, Repo: repo, Class: string(class), Message: msg,
		Strike: blame.Strikes(string(class), reason)})
	workflow.SetCurrentDetails(ctx, "Failed: "+msg)
	outcome := OutcomeFailed
	if strings.Contains(msg, "is parked") {
		outcome = OutcomeParked
	}
	setOutcome(ctx, outcome, msg)
	return temporal.NewApplicationErrorWithOptions(msg, string(class), temporal.ApplicationErrorOptions{
		NonRetryable: true, Cause: cause, Details: []any{reason},
	})
}

// cancelled records a cancelled collection — not failed, charged to nobody —
// and returns the cancel, so that the run ends as cancelled when it was
// asked to (a child or an activity cancelled by itself fails the run with
// its cancel as the cause).
func cancelled(ctx workflow.Context, key string, repo repoid.ID, step string, cause error) error {
	msg := fmt.Sprintf("collect %s: cancelled during %s", repo, step)
	record(ctx, FailCollectionInput{Key: key, Repo: repo, Class: "Cancelled", Message: msg, Cancelled: true})
	workflow.SetCurrentDetails(ctx, "Cancelled: "+msg)
	setOutcome(ctx, OutcomeCancelled, msg)
	if temporal.IsCanceledError(cause) {
		return cause
	}
	return temporal.NewCanceledError(msg)
}

// record writes a failed or cancelled collection, even when the workflow is
// being cancelled.
func record(ctx workflow.Context, in FailCollectionInput) {
	info := workflow.GetInfo(ctx)
	in.WorkflowID, in.RunID = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if err := workflow.ExecuteActivity(withOptions(dctx, dbOptions), activityFailCollection, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("Could not record the failed collection", "error", err)
	}
}

// classOf finds the class and reason of an activity's or child's error.
// Errors that carry no class (timeouts, cancellation) are Retryable.
func classOf(err error) (errclass.Class, string) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch c := errclass.Class(app.Type()); c {
		case errclass.Retryable, errclass.Permanent, errclass.StaleOwner:
			return c, reasonOf(app)
		}
	}
	return errclass.Retryable, ""
}

// reasonOf is the reason an activity's ApplicationError carries in its
// details (see activities.AppError).
func reasonOf(err *temporal.ApplicationError) string {
	var reason string
	if err != nil && err.HasDetails() {
		_ = err.Details(&reason)
	}
	return reason
}

// message is the innermost useful message of an error chain: the
// activity's own words rather than the SDK's wrappers.
func message(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "timed out (" + timeout.TimeoutType().String() + ")"
	}
	return err.Error()
}
