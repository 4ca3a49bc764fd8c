package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/workflows"

	"go.uber.org/zap"

	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
)

// SyncMirror clones or updates the local mirror of a repository.
func (a *Activities) SyncMirror(ctx context.Context, repo repoid.ID) (workflows.SyncMirrorResult, error) {
	host, err := a.Hosts.Lookup(repo.Host)
	if err != nil {
		return workflows.SyncMirrorResult{}, AppError(errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, err))
	}
	fetch, stop := watch(ctx, a.Liveness)
	defer stop()
	start := time.Now()
	remote, err := a.Mirrors.Sync(fetch, host.CloneURL(repo.Owner, repo.Name))
	if err != nil {
		return workflows.SyncMirrorResult{}, AppError(boundUnreachable(ctx, nil, stalled(fetch, err)))
	}
	cloned, err := host.RepositoryAt(remote.URL)
	if err != nil {
		return workflows.SyncMirrorResult{}, AppError(errclass.Wrap(errclass.Permanent, errclass.ReasonUnsupported,
			fmt.Errorf("%s redirected somewhere gitfleet cannot follow: %w", repo, err)))
	}
	a.logger(ctx).Info("mirror synced", zap.String("repository", repo.String()),
		zap.Bool("redirected", !cloned.SameRepository(repo)), zap.Bool("empty", remote.Empty),
		zap.Duration("took", time.Since(start)))
	return workflows.SyncMirrorResult{Cloned: cloned, Head: remote.Head, DefaultBranch: remote.DefaultBranch, Empty: remote.Empty,
		CodeScanning: workflows.CodeScanningOn(),
		StartedAt:    start.UTC(), RefsDigest: remote.RefsDigest}, nil
}

// LookupCodebase returns the live codebase holding a name, or nil.
func (a *Activities) LookupCodebase(ctx context.Context, repo repoid.ID) (*identity.Codebase, error) {
	cb, err := a.Store.LiveCodebaseByName(ctx, repo)
	if err != nil {
		return nil, AppError(err)
	}
	return cb.Identity(), nil
}

// VerifyCommit reports whether the remote still has the commit. It costs
// no API request and, in the usual case, no Git request either: when the
// local mirror holds the refs the collection's sync just saw and the
// commit is reachable from them, the remote has it reachable too. Else
// (another worker synced, or a force push left the commit unreachable) it
// fetches the commit by SHA, depth 1, into a scratch repository.
func (a *Activities) VerifyCommit(ctx context.Context, in workflows.VerifyCommitInput) (bool, error) {
	host, err := a.Hosts.Lookup(in.Repo.Host)
	if err != nil {
		return false, AppError(errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, err))
	}
	url := host.CloneURL(in.Repo.Owner, in.Repo.Name)
	held, reachable, err := a.Mirrors.Reaches(ctx, url, in.RefsDigest, in.SHA)
	if err != nil {
		return false, AppError(err)
	}
	if held && reachable {
		return true, nil
	}
	fetch, stop := watch(ctx, a.Liveness)
	defer stop()
	ok, err := a.Mirrors.HasCommit(fetch, url, in.SHA)
	if err != nil {
		return false, AppError(boundUnreachable(ctx, nil, stalled(fetch, err)))
	}
	return ok, nil
}

// LookupRepository asks the host's API who owner/name is now.
func (a *Activities) LookupRepository(ctx context.Context, repo repoid.ID) (identity.Repository, error) {
	host, err := a.Hosts.Lookup(repo.Host)
	if err != nil {
		return identity.Repository{}, AppError(errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, err))
	}
	dir, _, viaCreds, err := a.directory(ctx, host, repo.Owner)
	if err != nil {
		return identity.Repository{}, AppError(err)
	}
	r, err := dir.Repository(ctx, repo.Owner, repo.Name)
	if err != nil {
		return identity.Repository{}, AppError(rejected(boundUnreachable(ctx, nil, err), viaCreds))
	}
	return r, nil
}

// ExplainRefusal asks the API what it means that git refused a name (see
// identity.ExplainRefusal): by the external id of the codebase known by the
// name, then by the name. The API's 404 for the id proves the repository
// gone only to a credential that sees every repository of the host
// wherever it went (vcs.Directory.ProvesGone: a site administrator's
// token): the owner's installation or a member's token cannot see an
// account the repository was transferred to, so its 404 leaves the
// codebase inaccessible. When the credentials that read the owner cannot
// prove it, the host's GITHUB_TOKEN is asked, if it is a site
// administrator's. A codebase whose repository is gone is marked stale
// here; one gitfleet cannot read any more (private, or deleted or moved
// out of sight, the API cannot tell) is marked inaccessible, which nothing
// deletes. A token the API rejects (401) fails the explanation naming it.
func (a *Activities) ExplainRefusal(ctx context.Context, repo repoid.ID) (workflows.RefusalResult, error) {
	return a.explain(ctx, repo, false)
}

// ExplainMissingName asks the API about a name git served but the API's
// lookup by name did not know (404) while a codebase holds it: by the
// codebase's id, which answers even when the name does not (a lagging
// index, a rename without redirect), then by the name again. It returns
// the repository found (by id; else the one the name holds now — a
// repository deleted and created anew right after the clone), for
// ResolveIdentity to decide with; when the API knows neither, the verdict
// as ExplainRefusal gives it (gone with proof, else inaccessible), marked
// on the codebase, in words that do not say git refused.
func (a *Activities) ExplainMissingName(ctx context.Context, repo repoid.ID) (workflows.RefusalResult, error) {
	return a.explain(ctx, repo, true)
}

// explain is ExplainRefusal, or ExplainMissingName when served: git served
// the name.
func (a *Activities) explain(ctx context.Context, repo repoid.ID, served bool) (workflows.RefusalResult, error) {
	host, err := a.Hosts.Lookup(repo.Host)
	if err != nil {
		return workflows.RefusalResult{}, AppError(errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, err))
	}
	cb, err := a.Store.FindCodebase(ctx, repo)
	if err != nil {
		return workflows.RefusalResult{}, AppError(err)
	}
	owner := repo.Owner
	if cb != nil {
		owner = cb.Owner
	}
	dir, why, viaCreds, err := a.directory(ctx, host, owner)
	if err != nil {
		return workflows.RefusalResult{}, AppError(err)
	}
	var byID, byName *identity.Repository
	provesGone, adminRejected := false, false
	if cb != nil {
		if byID, err = found(dir.RepositoryByID(ctx, cb.ExternalID)); err != nil {
			return workflows.RefusalResult{}, AppError(rejected(err, viaCreds))
		}
		if byID == nil {
			if byID, provesGone, adminRejected, err = a.proveGone(ctx, host, dir, viaCreds, cb.ExternalID); err != nil {
				return workflows.RefusalResult{}, AppError(rejected(err, viaCreds))
			}
		}
	}
	if byID == nil {
		if byName, err = found(dir.Repository(ctx, repo.Owner, repo.Name)); err != nil {
			return workflows.RefusalResult{}, AppError(rejected(err, viaCreds))
		}
	}
	if served && cb != nil && (byID != nil || byName != nil) {
		out := workflows.RefusalResult{CodebaseID: cb.ID, Found: byID}
		if byID == nil {
			out.Found = byName
		}
		out.Message = fmt.Sprintf("the API does not know %s by name, yet knows repository id %s at %s/%s",
			repo, out.Found.ExternalID, out.Found.Owner, out.Found.Name)
		a.logger(ctx).Info("missing name found", zap.String("repository", repo.String()),
			zap.Bool("byID", byID != nil), zap.Int64("codebase", cb.ID))
		return out, nil
	}
	refusal, api := identity.ExplainRefusal(repo.Owner, repo.Name, cb.Identity(), byID, byName, provesGone)
	moved := api != nil && (!strings.EqualFold(api.Owner, repo.Owner) || !strings.EqualFold(api.Name, repo.Name))
	if refusal == identity.RefusedPrivate && moved && a.canRead(ctx, host, api.Owner) {
		// A private repository transferred out of what the credentials of
		// its old owner read, to an owner whose they read: collect it
		// there (case D).
		refusal = identity.RefusedMoved
	}
	out := workflows.RefusalResult{Refusal: refusal}
	if cb != nil {
		out.CodebaseID = cb.ID
	}
	switch refusal {
	case identity.RefusedGone:
		since, err := a.Store.MarkStaleSince(ctx, cb.ID, a.now())
		if err != nil {
			return workflows.RefusalResult{}, AppError(err)
		}
		out.StaleSince = since
		out.Message = fmt.Sprintf("repository %s no longer exists since %s (codebase %d is stale, deleted after %s)",
			repo, since.Format(time.RFC3339), cb.ID, since.Add(workflows.StaleRetention).Format(time.RFC3339))
		if served {
			out.Message += ": deleted right after git served it, the API knows neither its name nor its id"
		}
		if byName != nil && byName.ExternalID != cb.ExternalID {
			out.Message += fmt.Sprintf("; its name now holds another repository (id %s) that git refuses too", byName.ExternalID)
		}
	case identity.RefusedMoved:
		to := repoid.ID{Host: repo.Host, Owner: api.Owner, Name: api.Name}
		out.MovedTo = &to
		out.Message = fmt.Sprintf("%s is now %s (renamed or transferred)", repo, to)
	case identity.RefusedInaccessible:
		since, err := a.Store.MarkInaccessible(ctx, cb.ID, a.now())
		if err != nil {
			return workflows.RefusalResult{}, AppError(err)
		}
		out.InaccessibleSince = since
		refuses := "git refuses it and the API does not know"
		if served {
			refuses = "git served it, but the API knows neither its name nor"
		}
		out.Message = fmt.Sprintf("%s can no longer be read since %s: %s repository id %s: "+
			"deleted, made private or transferred out of sight (%s, so it cannot tell); codebase %d is kept as inaccessible, never deleted for it",
			repo, since.Format(time.RFC3339), refuses, cb.ExternalID, a.blindness(host, why, viaCreds, adminRejected), cb.ID)
	case identity.RefusedPrivate:
		switch {
		case moved:
			out.Message = fmt.Sprintf("%s is now %s, private, and gitfleet has no credentials that read %s", repo, repoid.ID{Host: repo.Host, Owner: api.Owner, Name: api.Name}, api.Owner)
		case why != "":
			out.Message = fmt.Sprintf("%s is private and %s: gitfleet cannot collect it", repo, why)
		case viaCreds:
			out.Message = fmt.Sprintf("%s is private and %s does not read it (not granted to it): gitfleet cannot collect it", repo, a.Creds.Source(host.Name).Kind())
		default:
			out.Message = fmt.Sprintf("%s is private: gitfleet fetches without a token and cannot collect it (install the GitHub App on %s, or configure a token)", repo, owner)
		}
		if cb != nil {
			since, err := a.Store.MarkInaccessible(ctx, cb.ID, a.now())
			if err != nil {
				return workflows.RefusalResult{}, AppError(err)
			}
			out.InaccessibleSince = since
			out.Message += fmt.Sprintf(" (codebase %d is kept as inaccessible since %s)", cb.ID, since.Format(time.RFC3339))
		}
	case identity.RefusedNotFound:
		switch {
		case why != "":
			out.Message = fmt.Sprintf("%s: not found (or private: %s)", repo, why)
		case viaCreds:
			out.Message = fmt.Sprintf("%s: not found (or private and not granted to %s)", repo, a.Creds.Source(host.Name).Kind())
		case host.Token == "":
			out.Message = fmt.Sprintf("%s: not found (or private: set GITHUB_TOKEN)", repo)
		default:
			out.Message = fmt.Sprintf("%s: not found (or private and not visible to the worker's GITHUB_TOKEN)", repo)
		}
	default:
		out.Message = fmt.Sprintf("git refused %s although the API says it exists and is public", repo)
	}
	a.logger(ctx).Info("refused fetch explained", zap.String("repository", repo.String()),
		zap.String("refusal", string(refusal)), zap.Int64("codebase", out.CodebaseID))
	return out, nil
}

// proveGone asks, after dir's 404 for a codebase's id, a credential that
// sees every repository of the host wherever it went: dir's own when it is
// one, else the host's GITHUB_TOKEN when dir is the credentials' and that
// token is a site administrator's. It returns the repository that token
// found (moved out of the credentials' sight), or whether its 404 proves
// the repository gone. A GITHUB_TOKEN the API rejects (401) proves nothing
// and is reported, for the message to name it.
func (a *Activities) proveGone(ctx context.Context, host vcs.Host, dir vcs.Directory, viaCreds bool, externalID string) (
	r *identity.Repository, gone, adminRejected bool, err error) {
	if viaCreds {
		if ok, err := dir.ProvesGone(ctx); err != nil || ok {
			return nil, ok, false, err
		}
		if host.Token == "" {
			return nil, false, false, nil
		}
		if dir, err = vcs.NewGitHub(host, nil); err != nil {
			return nil, false, false, err
		}
	}
	ok, err := dir.ProvesGone(ctx)
	if vcs.Unauthorized(err) {
		return nil, false, true, nil
	}
	if err != nil || !ok {
		return nil, false, false, err
	}
	if !viaCreds {
		return nil, true, false, nil // dir's own 404 was the site administrator's
	}
	r, err = found(dir.RepositoryByID(ctx, externalID))
	return r, err == nil && r == nil, false, err
}

// blindness says why the API's 404 for an id proves nothing.
func (a *Activities) blindness(host vcs.Host, why string, viaCreds, adminRejected bool) string {
	var s string
	switch {
	case why != "":
		s = why
	case viaCreds:
		s = fmt.Sprintf("%s sees only the accounts it reads, not every account the repository may have gone to", a.Creds.Source(host.Name).Kind())
	case host.Token == "":
		s = "the worker has no GITHUB_TOKEN"
	default:
		s = "the worker's GITHUB_TOKEN is not a site administrator's: it does not see every account the repository may have gone to"
	}
	switch {
	case adminRejected:
		s += "; GitHub rejected the worker's GITHUB_TOKEN (401 Bad credentials): replace it"
	case host.Token == "" || viaCreds && why == "":
		s += "; only a site administrator's GITHUB_TOKEN proves a deletion"
	}
	return s
}

// rejected names the token the API refused (401): the user must replace
// it, and until then the API cannot tell a deleted repository from a
// hidden one. It is no verdict about the repository (reason credentials:
// nothing is charged). A refusal of the credentials' tokens is named by
// gitcreds already.
func rejected(err error, viaCreds bool) error {
	var ce *errclass.Error
	if !vcs.Unauthorized(err) || (errors.As(err, &ce) && ce.Reason == gitcreds.ReasonCredentials) {
		return err
	}
	whose := "the worker's GITHUB_TOKEN"
	if viaCreds {
		whose = "the credentials' token"
	}
	return &errclass.Error{Class: errclass.Permanent, Reason: gitcreds.ReasonCredentials,
		Err: fmt.Errorf("GitHub rejected %s (401 Bad credentials): replace it; until then the API cannot say why git refuses a repository, nor tell a deleted one from a hidden one: %w", whose, err)}
}

// canRead reports whether the credentials have a token for owner's
// repositories on host.
func (a *Activities) canRead(ctx context.Context, host vcs.Host, owner string) bool {
	src := a.Creds.Source(host.Name)
	if src == nil {
		return false
	}
	tok, err := src.Token(ctx, owner)
	return err == nil && tok != ""
}

// found turns the API's 404 into nil.
func found(r identity.Repository, err error) (*identity.Repository, error) {
	if err != nil {
		if c := errclass.Classify(err); c.Class == errclass.Permanent && c.Reason == errclass.ReasonNotFound {
			return nil, nil
		}
		return nil, err
	}
	return &r, nil
}

// ApplyIdentity applies the identity decision in one transaction (see
// store.ApplyIdentity). The activity supplies the clock.
func (a *Activities) ApplyIdentity(ctx context.Context, in workflows.ApplyIdentityInput) (identity.Outcome, error) {
	res, err := a.Store.ApplyIdentity(ctx, store.ApplyInput{Key: in.Key, WorkflowID: in.WorkflowID, RunID: in.RunID,
		Observation: in.Observation, Now: a.now()})
	if err != nil {
		if errors.Is(err, identity.ErrNeedAPI) {
			err = errclass.Wrap(errclass.Permanent, "inconsistent facts", err)
		}
		return identity.Outcome{}, AppError(err)
	}
	metrics.Collections.Inc(string(res.Case))
	if !res.Changed {
		a.logger(ctx).Info("identity resolved", zap.String("case", string(res.Case)),
			zap.Int64("codebase", res.CodebaseID), zap.Int64("retired", res.RetiredID))
	}
	return res, nil
}

// ConfirmCodebase settles a collection in one step when its sync proved
// the codebase: the live codebase holding the name has, as its last
// commit, the head the remote advertised — case B, with no API request and
// no fetch (as ResolveIdentity decides it). It applies the decision and,
// when the codebase's last scan is current (ScanNeeded), records the
// collection too. Otherwise it returns the lookup, for ResolveIdentity to
// go on from. Each step is idempotent, so a retry repeats them safely.
func (a *Activities) ConfirmCodebase(ctx context.Context, in workflows.ConfirmCodebaseInput) (workflows.ConfirmCodebaseResult, error) {
	byName, err := a.LookupCodebase(ctx, in.Cloned)
	if err != nil {
		return workflows.ConfirmCodebaseResult{}, err
	}
	out := workflows.ConfirmCodebaseResult{ByName: byName}
	if byName == nil || in.Head == "" || byName.LastCommitSHA != in.Head {
		return out, nil
	}
	applied, err := a.ApplyIdentity(ctx, workflows.ApplyIdentityInput{Key: in.Key, WorkflowID: in.WorkflowID, RunID: in.RunID,
		Observation: identity.Observation{Repo: in.Cloned, ExpectByNameID: byName.ID, VerifiedSHA: in.Head,
			Head: in.Head, DefaultBranch: in.DefaultBranch}})
	if err != nil || applied.Changed {
		return out, err // rows moved under a concurrent collection: ResolveIdentity looks again
	}
	out.Confirmed = &workflows.ResolveIdentityResult{Case: applied.Case, CodebaseID: applied.CodebaseID,
		Owner: applied.Owner, Name: applied.Name, RetiredCodebaseID: applied.RetiredID}
	current, err := a.Store.ScanCurrent(ctx, applied.CodebaseID, in.RefsDigest, a.Policy)
	if err != nil || !current {
		return out, AppError(err)
	}
	if err := a.CompleteCollection(ctx, workflows.CompleteCollectionInput{Key: in.Key, CodebaseID: applied.CodebaseID,
		Commit: in.Head, RefsDigest: in.RefsDigest}); err != nil {
		return out, err
	}
	out.Recorded = true
	return out, nil
}

// MarkStale marks a codebase whose repository no longer exists.
func (a *Activities) MarkStale(ctx context.Context, codebaseID int64) error {
	return AppError(a.Store.MarkStale(ctx, codebaseID, a.now()))
}

// ScanNeeded reports whether a re-collection must scan: not when the
// codebase's last collection saw the same branches and tags and its scan is
// Done under the current rules.
func (a *Activities) ScanNeeded(ctx context.Context, in workflows.ScanNeededInput) (bool, error) {
	current, err := a.Store.ScanCurrent(ctx, in.CodebaseID, in.RefsDigest, a.Policy)
	if err != nil {
		return false, AppError(err)
	}
	return !current, nil
}

// CompleteCollection records a successful collection.
func (a *Activities) CompleteCollection(ctx context.Context, in workflows.CompleteCollectionInput) error {
	return AppError(a.Store.CompleteCollection(ctx, in.Key, in.CodebaseID, in.Commit, in.RefsDigest, a.now()))
}

// FailCollection records a failed or cancelled collection and, for a
// failure of the repository's own doing, lengthens the codebase's failure
// streak.
func (a *Activities) FailCollection(ctx context.Context, in workflows.FailCollectionInput) error {
	return AppError(a.Store.FailCollection(ctx, store.Failure{Key: in.Key, Repo: in.Repo, Class: in.Class,
		Message: in.Message, WorkflowID: in.WorkflowID, RunID: in.RunID, Strike: in.Strike, Cancelled: in.Cancelled, Now: a.now()}))
}

// DeleteStaleCodebases hard-deletes codebases stale for longer than maxAge,
// with their history, and returns how many went. CleanupStale runs that
// began before the cleanup went in rounds (Cleanup.CleanUpDatabase) call
// it: it deletes in short transactions until its deadline is near, and
// leaves the deleted codebases' scan data to the next round of cleanup.
func (a *Activities) DeleteStaleCodebases(ctx context.Context, maxAge time.Duration) (int64, error) {
	n, err := deleteStale(ctx, a.Store, a.now().Add(-maxAge))
	if err != nil {
		return n, err
	}
	a.logger(ctx).Info("stale codebases deleted", zap.Int64("count", n), zap.Duration("maxAge", maxAge))
	return n, nil
}

// CodebaseShard describes the shard that scans a codebase: keyed by the
// codebase, so a renamed repository continues from its watermarks and a
// recreated one (a new codebase) starts afresh; located at the codebase's
// current clone URL.
func (a *Activities) CodebaseShard(ctx context.Context, codebaseID int64) (shard.Spec, error) {
	cb, err := a.Store.CodebaseByID(ctx, codebaseID)
	if err != nil {
		return shard.Spec{}, AppError(err)
	}
	if cb == nil {
		return shard.Spec{}, AppError(errclass.Permanentf(errclass.ReasonNotFound, "codebase %d does not exist", codebaseID))
	}
	host, err := a.Hosts.Lookup(cb.Host)
	if err != nil {
		return shard.Spec{}, AppError(errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, err))
	}
	return shard.Spec{Key: shard.CodebaseKey(codebaseID), CodebaseID: codebaseID,
		Target: target.Target{Location: host.CloneURL(cb.Owner, cb.Name)}}, nil
}
