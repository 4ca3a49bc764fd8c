package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/blame"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
)

// ResolveIdentityInput is what the clone established.
type ResolveIdentityInput struct {
	// Key identifies the collection (idempotency of the apply); WorkflowID
	// and RunID are the Collect run it belongs to.
	Key        string `json:"key"`
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	// Cloned is the repository actually cloned, after redirects.
	Cloned        repoid.ID `json:"cloned"`
	Head          string    `json:"head,omitempty"`
	DefaultBranch string    `json:"defaultBranch,omitempty"`
	// ClonedAt is when the sync started (zero in runs recorded before it
	// was passed).
	ClonedAt time.Time `json:"clonedAt,omitzero"`
	// RefsDigest names the branches and tags the sync saw (empty in runs
	// recorded before it was passed): VerifyCommit answers from a mirror
	// that holds them.
	RefsDigest string `json:"refsDigest,omitempty"`
	// Place is where the sync ran: VerifyCommit runs there, on the mirror
	// the sync left (empty in runs recorded before: placed anew).
	Place GitPlace `json:"place,omitzero"`
	// Looked: Collect looked the name up already (ConfirmCodebase), and
	// Known is what it found (nil: no live codebase holds the name); the
	// first round goes on from it. A later round looks again.
	Known  *identity.Codebase `json:"known,omitempty"`
	Looked bool               `json:"looked,omitempty"`
}

// ResolveIdentityResult is the decision that was applied.
type ResolveIdentityResult struct {
	Case              identity.Case `json:"case"`
	CodebaseID        int64         `json:"codebaseId"`
	Owner             string        `json:"owner"`
	Name              string        `json:"name"`
	RetiredCodebaseID int64         `json:"retiredCodebaseId,omitempty"`
	// APILookups counts API lookups made (0 for a verified re-collection).
	APILookups int `json:"apiLookups"`
}

// maxApplyRounds bounds how often resolution re-reads the database because
// a concurrent collection changed the rows it had looked at.
const maxApplyRounds = 5

// verifyOptions retries fetch-SHA a few times only: when the retries are
// spent, the API decides instead (correct either way, one request dearer).
var verifyOptions = func() workflow.ActivityOptions {
	o := gitOptions
	o.ScheduleToCloseTimeout = 10 * time.Minute
	// Queued behind the Git work of the fleet this long, it gives way to
	// the API, which answers the same question at once.
	o.ScheduleToStartTimeout = 5 * time.Minute
	o.RetryPolicy = retryPolicy(3)
	return o
}()

// ResolveIdentity decides which codebase a cloned repository is (architecture §3):
// a live codebase holding the name whose last commit the remote still has is
// the same codebase, proven without any API request; otherwise the API says
// which repository id the name holds now, and the decision follows the id.
func ResolveIdentity(ctx workflow.Context, in ResolveIdentityInput) (ResolveIdentityResult, error) {
	var out ResolveIdentityResult
	for round := 1; round <= maxApplyRounds; round++ {
		var byName *identity.Codebase
		if round == 1 && in.Looked {
			byName = in.Known
		} else if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityLookupCodebase, in.Cloned).Get(ctx, &byName); err != nil {
			return out, err
		}
		verified := verify(ctx, in, byName)

		var api *identity.Repository
		if identity.NeedsAPI(byName, verified != "") {
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Looking %s up through the API", in.Cloned))
			var repo identity.Repository
			out.APILookups++
			err := workflow.ExecuteActivity(withOptions(ctx, apiOptions), activityLookupRepository, in.Cloned).Get(ctx, &repo)
			if err != nil {
				_, reason := classOf(err)
				if reason != errclass.ReasonNotFound || byName == nil {
					return out, err
				}
				if workflow.GetVersion(ctx, missingNameChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
					return out, gone(ctx, in.Cloned, byName.ID)
				}
				found, err := missingName(ctx, in.Cloned)
				if err != nil {
					return out, err
				}
				out.APILookups++
				repo = *found
			}
			// Runs recorded before creation times were compared replay without.
			clonedAt := in.ClonedAt
			if workflow.GetVersion(ctx, "race-created-at", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				clonedAt = time.Time{}
			}
			if err := identity.CheckRace(in.Cloned.Owner, in.Cloned.Name, clonedAt, repo); err != nil {
				return out, temporal.NewApplicationError(err.Error(), string(errclass.Retryable), errclass.ReasonRace)
			}
			api = &repo
		}

		var expect int64
		if byName != nil {
			expect = byName.ID
		}
		var applied identity.Outcome
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityApplyIdentity, ApplyIdentityInput{
			Key: in.Key, WorkflowID: in.WorkflowID, RunID: in.RunID,
			Observation: identity.Observation{Repo: in.Cloned, ExpectByNameID: expect, VerifiedSHA: verified, API: api,
				Head: in.Head, DefaultBranch: in.DefaultBranch},
		}).Get(ctx, &applied)
		if err != nil {
			return out, err
		}
		if applied.Changed {
			workflow.GetLogger(ctx).Info("Codebase rows changed under a concurrent collection; resolving again", "round", round)
			continue
		}
		out.Case, out.CodebaseID, out.Owner, out.Name, out.RetiredCodebaseID =
			applied.Case, applied.CodebaseID, applied.Owner, applied.Name, applied.RetiredID
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Case %s (%s): codebase %d", out.Case, out.Case.Describe(), out.CodebaseID))
		return out, nil
	}
	return out, temporal.NewApplicationError("identity kept changing under concurrent collections", string(errclass.Retryable), "contention")
}

// verify returns the codebase's last commit if the remote still has it.
func verify(ctx workflow.Context, in ResolveIdentityInput, byName *identity.Codebase) string {
	if byName == nil || byName.LastCommitSHA == "" {
		return ""
	}
	// The remote advertised it as HEAD during the sync: that is proof already.
	if byName.LastCommitSHA == in.Head {
		return in.Head
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Verifying %s still has its last collected commit", in.Cloned))
	var ok bool
	place := in.Place
	if place.Repo == nil && place.Location == "" {
		place.Repo = &in.Cloned
	}
	err := runGit(ctx, &place, verifyOptions, activityVerifyCommit, VerifyCommitInput{
		Repo: in.Cloned, SHA: byName.LastCommitSHA, RefsDigest: in.RefsDigest,
	}, &ok)
	if err != nil {
		workflow.GetLogger(ctx).Warn("Fetch by SHA failed; asking the API instead", "error", err)
		return ""
	}
	if !ok {
		return ""
	}
	return byName.LastCommitSHA
}

// missingNameChange: the runs in which the API's 404 for the name of a
// codebase git just served is resolved by the codebase's id
// (missingName); runs recorded before asked as for a refused fetch (gone)
// and started over from the clone, up to 5 times, when the API knew the id.
const missingNameChange = "missing-name-by-id"

// missingName handles the API's 404 for the name of a codebase git just
// served (ExplainMissingName): the API asked by the codebase's id — or
// the name asked again — knows a repository, which the decision then
// follows as if the name had answered it: the codebase's own at that name
// (a lagging index: F or B), elsewhere (renamed under the clone) or
// created after the clone (deleted and created anew under it), both a
// race CheckRace reports, so resolution starts over once, as §3 says. When
// the API knows neither, the verdict: gone (with proof) or inaccessible,
// Permanent with its blame reason.
func missingName(ctx workflow.Context, repo repoid.ID) (*identity.Repository, error) {
	var r RefusalResult
	if err := workflow.ExecuteActivity(withOptions(ctx, apiOptions), activityExplainMissingName, repo).Get(ctx, &r); err != nil {
		return nil, err
	}
	if r.Found != nil {
		return r.Found, nil
	}
	reason := errclass.ReasonNotFound
	switch r.Refusal {
	case identity.RefusedGone:
		reason = blame.ReasonGone
	case identity.RefusedInaccessible:
		reason = blame.ReasonInaccessible
	case identity.RefusedPrivate:
		reason = blame.ReasonPrivate
	}
	return nil, temporal.NewApplicationError(r.Message, string(errclass.Permanent), reason)
}

// gone handles an API 404 for a known codebase's name. A 404 proves
// nothing without a token that sees the owner's private repositories, so
// the API is asked as for a refused fetch (ExplainRefusal): by the
// codebase's id, with a token that sees the owner — gone (stale), or not
// readable any more (inaccessible: kept), or private, each failing
// Permanent with its blame reason; a repository the API finds under another
// name, or still here, moved under the clone: Retryable, resolution starts
// over. (Runs recorded before marked the codebase stale on the 404 alone.)
func gone(ctx workflow.Context, repo repoid.ID, codebaseID int64) error {
	if workflow.GetVersion(ctx, "gone-needs-proof", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityMarkStale, codebaseID).Get(ctx, nil); err != nil {
			return err
		}
		return temporal.NewApplicationError(fmt.Sprintf("repository %s no longer exists (codebase %d marked stale)", repo, codebaseID),
			string(errclass.Permanent), errclass.ReasonNotFound)
	}
	var r RefusalResult
	if err := workflow.ExecuteActivity(withOptions(ctx, apiOptions), activityExplainRefusal, repo).Get(ctx, &r); err != nil {
		return err
	}
	switch r.Refusal {
	case identity.RefusedGone:
		return temporal.NewApplicationError(r.Message, string(errclass.Permanent), blame.ReasonGone)
	case identity.RefusedInaccessible:
		return temporal.NewApplicationError(r.Message, string(errclass.Permanent), blame.ReasonInaccessible)
	case identity.RefusedPrivate:
		return temporal.NewApplicationError(r.Message, string(errclass.Permanent), blame.ReasonPrivate)
	}
	return temporal.NewApplicationError(fmt.Sprintf("the API does not know %s by name, yet knows its repository (%s): it moved under the clone",
		repo, r.Message), string(errclass.Retryable), errclass.ReasonRace)
}
