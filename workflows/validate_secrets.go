package workflows

import (
	"fmt"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ValidateSecretsInput says which secrets to check.
type ValidateSecretsInput struct {
	// ShardID: one shard's secrets (0: every shard's, as the schedule
	// runs it).
	ShardID int64 `json:"shardId,omitempty"`
	// SecretHash: one secret ("": every supported one).
	SecretHash string `json:"secretHash,omitempty"`
	// Unchecked: only secrets never checked (after a scan found new
	// ones).
	Unchecked bool `json:"unchecked,omitempty"`
	// Trigger says who asked: scan, schedule, manual.
	Trigger string `json:"trigger,omitempty"`
	// Place is where the shard's Git work runs (a scan hands its own);
	// empty: placed per repository.
	Place GitPlace `json:"place,omitzero"`
	// PageSize (default 500), Batch (secrets per activity, default 50)
	// and PagesPerRun (default 10: a run's history stays small; the next
	// run continues as new) bound a run.
	PageSize    int `json:"pageSize,omitempty"`
	Batch       int `json:"batch,omitempty"`
	PagesPerRun int `json:"pagesPerRun,omitempty"`
	// After and Carried continue a run that continued as new.
	After   ValidationCursor `json:"after,omitzero"`
	Carried ValidationCounts `json:"carried,omitzero"`
	Runs    int              `json:"runs,omitempty"`
}

// ValidateSecretsResult counts the checks of every run of the chain.
type ValidateSecretsResult struct {
	ValidationCounts
	// Enabled is false when the workers send no check (validation off).
	Enabled bool `json:"enabled"`
	// Runs counts the runs of the chain (continued as new).
	Runs int `json:"runs"`
}

// groupsAtOnce bounds the repositories a run checks at once;
// maxRunEvents the events of a run before it continues as new.
const (
	groupsAtOnce = 8
	maxRunEvents = 5000
)

// ValidateSecrets checks secrets with their providers (architecture §8,
// "Which secrets still work"): a page of secrets at a time, by repository,
// each group on the worker that holds the repository's mirror (runGit),
// which reads each secret again from its blob at the moment of the check;
// the secret never leaves that activity. The run's history carries
// finding ids and counts only.
func ValidateSecrets(ctx workflow.Context, in ValidateSecretsInput) (ValidateSecretsResult, error) {
	if in.PageSize <= 0 {
		in.PageSize = 500
	}
	if in.Batch <= 0 {
		in.Batch = 50
	}
	if in.PagesPerRun <= 0 {
		in.PagesPerRun = 10
	}
	out := ValidateSecretsResult{ValidationCounts: in.Carried, Enabled: true, Runs: in.Runs + 1}
	places := map[int64]*GitPlace{}
	if in.ShardID != 0 && (in.Place.Repo != nil || in.Place.Location != "") {
		p := in.Place
		places[in.ShardID] = &p
	}
	details := func(state string) {
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** %s checked: %d valid, %d invalid (%d revoked), %d unknown",
			state, count(out.Checked, "secret", "secrets"), out.Valid, out.Invalid, out.Revoked, out.Unknown))
	}
	after := in.After
	// The repositories whose secrets this run found valid: their alerts
	// are started as the run ends (runs recorded before replay without).
	valid := map[int64]bool{}
	announce := func() {
		if len(valid) == 0 || version(ctx, notifyValid, 1) != 1 || !notifying(ctx) {
			return
		}
		shards := make([]int64, 0, len(valid))
		for id := range valid {
			shards = append(shards, id)
		}
		startNotify(ctx, NotifySecretsInput{Kind: NotifyValid, Shards: shards}, "")
	}
	for page := 0; page < in.PagesPerRun; page++ {
		var p ValidationPage
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityListValidation, ListValidationInput{
			ShardID: in.ShardID, SecretHash: in.SecretHash, Unchecked: in.Unchecked, After: after, Limit: in.PageSize, Batch: in.Batch,
		}).Get(ctx, &p)
		if err != nil {
			setOutcome(ctx, OutcomeFailed, message(err))
			return out, err
		}
		if !p.Enabled {
			out.Enabled = false
			setOutcome(ctx, OutcomeDone, "validity checks are off (GITFLEET_VALIDATE): nothing sent")
			return out, nil
		}
		// A page's repositories are checked a few at a time: each on its
		// own worker, and a provider's limits hold per worker.
		running, cancelled := 0, false
		for _, g := range p.Groups {
			place := places[g.ShardID]
			if place == nil {
				place = &GitPlace{Repo: g.Repo, Location: g.Location}
				places[g.ShardID] = place
			}
			if err := workflow.Await(ctx, func() bool { return running < groupsAtOnce }); err != nil {
				return out, err
			}
			running++
			batch := ValidateBatchInput{ShardID: g.ShardID, Findings: g.Findings}
			workflow.Go(ctx, func(gctx workflow.Context) {
				defer func() { running-- }()
				var c ValidationCounts
				err := runGit(gctx, place, validateOptions, activityValidateSecrets, batch, &c)
				switch {
				case temporal.IsCanceledError(err):
					cancelled = true
				case err != nil:
					// One repository's trouble (its mirror gone and its
					// host down) does not stop the fleet's checks: its
					// secrets are checked at the next run.
					workflow.GetLogger(gctx).Warn("A repository's secrets were not checked", "shard", batch.ShardID, "error", message(err))
					out.NotChecked += len(batch.Findings)
				default:
					out.Add(c)
					if c.Valid > 0 {
						valid[batch.ShardID] = true
					}
					details("Checking")
				}
			})
		}
		if err := workflow.Await(ctx, func() bool { return running == 0 }); err != nil {
			return out, err
		}
		if cancelled {
			return out, temporal.NewCanceledError()
		}
		if !p.More {
			msg := fmt.Sprintf("%s checked: %d valid, %d invalid (%d revoked), %d unknown",
				count(out.Checked, "secret", "secrets"), out.Valid, out.Invalid, out.Revoked, out.Unknown)
			if out.NotChecked > 0 {
				msg += fmt.Sprintf("; %d not checked (their repository's check failed: the next run tries again)", out.NotChecked)
			}
			setOutcome(ctx, OutcomeDone, msg)
			details("Done")
			announce()
			return out, nil
		}
		after = p.Next
		// A page of repositories of one secret each costs two activities
		// a secret (placing, checking): the run continues as new well
		// before its history grows large.
		if info := workflow.GetInfo(ctx); info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > maxRunEvents {
			break
		}
	}
	announce()
	next := in
	next.After, next.Carried, next.Runs, next.Place = after, out.ValidationCounts, out.Runs, GitPlace{}
	return out, workflow.NewContinueAsNewError(ctx, ValidateSecrets, next)
}

// validateAfterScan: the runs that start ValidateSecrets for the secrets
// a scan found new.
const validateAfterScan = "validate-after-scan"

// validateOn is the worker's setting (SetValidateAfterScan): whether a
// scan that found new secrets starts their check.
var validateOn atomic.Bool

// SetValidateAfterScan says whether this worker's scans that find new
// secrets start ValidateSecrets (the worker sets it when validity checks
// are on for some provider). Off, no check is started at all.
func SetValidateAfterScan(on bool) { validateOn.Store(on) }

// validationOn reads the setting once into the history (a side effect):
// a replay reads what the run saw, whatever the replaying worker's setting.
func validationOn(ctx workflow.Context) bool {
	var on bool
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return validateOn.Load() }).Get(&on); err != nil {
		return false
	}
	return on
}

// startValidation starts the check of the secrets a scan found new, as a
// child that outlives the scan (abandoned): one per shard at a time — a
// check already running for the shard is left to pick them up, or the
// next scan or the schedule will. With validation off, the child sees so
// and ends, having sent nothing.
func startValidation(ctx workflow.Context, shardID int64, shardKey string, place GitPlace) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            ValidateSecretsWorkflowID(shardID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowRunTimeout:    6 * time.Hour,
		TypedSearchAttributes: temporal.NewSearchAttributes(SAShard.ValueSet(shardKey)),
		Memo:                  map[string]any{"target": fmt.Sprintf("the new secrets of shard %d", shardID)},
	})
	f := workflow.ExecuteChildWorkflow(cctx, ValidateSecrets, ValidateSecretsInput{ShardID: shardID, Unchecked: true, Trigger: "scan", Place: place})
	if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Info("Validity checks of the new secrets not started", "shard", shardID, "error", message(err))
	}
}
