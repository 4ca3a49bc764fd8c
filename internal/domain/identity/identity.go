package identity

import (
	"errors"
	"fmt"
	"gitfleet/internal/domain/repoid"
	"strings"
	"time"
)

// Case names how a collection related to the codebases already known. The
// letters are those of docs/architecture.md §3, R among them.
type Case string

const (
	CaseNew       Case = "A" // no codebase by name or by id: create one
	CaseSame      Case = "B" // same codebase, proven by fetch-SHA (no API call) or by the API
	CaseMoved     Case = "D" // renamed or transferred: the codebase follows the id
	CaseReplaced  Case = "E" // the name now holds another repository: old codebase goes stale
	CaseForcePush Case = "F" // same id, but the last collected commit is gone
	CaseReturned  Case = "R" // a stale codebase's repository is back: un-stale it
)

// Describe is a short human explanation of the case.
func (c Case) Describe() string {
	switch c {
	case CaseNew:
		return "new repository"
	case CaseSame:
		return "same repository"
	case CaseMoved:
		return "renamed or transferred"
	case CaseReplaced:
		return "name reused by a different repository"
	case CaseForcePush:
		return "history rewritten (force push)"
	case CaseReturned:
		return "repository came back"
	}
	return "unknown"
}

// Codebase is the part of a stored codebase the decision looks at.
type Codebase struct {
	ID            int64  `json:"id"`
	ExternalID    string `json:"externalId"`
	Owner         string `json:"owner"`
	Name          string `json:"name"`
	LastCommitSHA string `json:"lastCommitSha,omitempty"`
	Stale         bool   `json:"stale,omitempty"`
}

// Repository is what the host's API says about a repository now.
type Repository struct {
	ExternalID    string `json:"externalId"`
	Owner         string `json:"owner"`
	Name          string `json:"name"`
	DefaultBranch string `json:"defaultBranch,omitempty"`
	Private       bool   `json:"private,omitempty"`
	// CreatedAt is when the host says the repository was created (GitHub:
	// whole seconds); zero when unknown.
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Observation is what one collection saw of a repository before deciding:
// the name it cloned, the codebase it found by that name and the proofs it
// gathered. The decision is taken again on the rows as they are when it is
// applied (see Decide).
type Observation struct {
	// Repo is the repository as cloned (after the host's redirects).
	Repo repoid.ID `json:"repository"`
	// ExpectByNameID is the live codebase found by name (0: none).
	ExpectByNameID int64 `json:"expectByNameId,omitempty"`
	// VerifiedSHA is ExpectByNameID's last commit, proven present on the
	// remote by fetch-SHA; "" when not verified.
	VerifiedSHA string `json:"verifiedSha,omitempty"`
	// API is the host API's answer; nil when not asked (case B).
	API *Repository `json:"api,omitempty"`
	// Head and DefaultBranch are what the remote's HEAD pointed at.
	Head          string `json:"head,omitempty"`
	DefaultBranch string `json:"defaultBranch,omitempty"`
}

// Outcome is what applying a decision decided and wrote.
type Outcome struct {
	// Changed reports that the rows the observation looked at moved under
	// it (a concurrent collection won), so it no longer decides anything:
	// resolve again. Nothing was written.
	Changed    bool   `json:"changed,omitempty"`
	Case       Case   `json:"case,omitempty"`
	CodebaseID int64  `json:"codebaseId,omitempty"`
	Owner      string `json:"owner,omitempty"`
	Name       string `json:"name,omitempty"`
	// RetiredID is the codebase marked stale because its name now holds
	// another repository (case E).
	RetiredID int64 `json:"retiredId,omitempty"`
}

// Facts are the inputs of a decision.
type Facts struct {
	// ByName is the live codebase holding the requested owner/name, if any.
	ByName *Codebase
	// Verified reports that ByName.LastCommitSHA was fetched by SHA from the
	// remote just now, which proves the remote is still ByName's repository.
	Verified bool
	// API is what the host's API said; nil when it was not asked.
	API *Repository
	// ByExternalID is the codebase (live or stale) holding API.ExternalID.
	ByExternalID *Codebase
}

// Decision says what to write.
type Decision struct {
	Case Case
	// Target is the existing codebase the collection belongs to; nil means
	// create a new codebase from Facts.API.
	Target *Codebase
	// Rename: set Target's owner/name to the API's.
	Rename bool
	// Unstale: Target is stale and comes back.
	Unstale bool
	// Retire is a live codebase that must be marked stale first, because the
	// name it holds now belongs to another repository.
	Retire *Codebase
}

// ErrNeedAPI means the facts do not prove identity without asking the API.
var ErrNeedAPI = errors.New("identity: the repository must be looked up through the API")

// NeedsAPI reports whether a decision needs the API: only a verified live
// codebase by name is proof enough on its own.
func NeedsAPI(byName *Codebase, verified bool) bool { return byName == nil || !verified }

// Decide classifies the facts. It never guesses: without a verified match it
// needs the API's answer.
func Decide(f Facts) (Decision, error) {
	if f.ByName != nil && f.ByName.Stale {
		return Decision{}, fmt.Errorf("identity: codebase %d is stale and cannot hold a name", f.ByName.ID)
	}
	if f.ByName != nil && f.Verified {
		return Decision{Case: CaseSame, Target: f.ByName}, nil
	}
	if f.API == nil {
		return Decision{}, ErrNeedAPI
	}
	if f.ByExternalID != nil && f.ByExternalID.ExternalID != f.API.ExternalID {
		return Decision{}, fmt.Errorf("identity: codebase %d has external id %q, looked up as %q",
			f.ByExternalID.ID, f.ByExternalID.ExternalID, f.API.ExternalID)
	}
	renamed := func(c *Codebase) bool { return c.Owner != f.API.Owner || c.Name != f.API.Name }

	if f.ByName != nil {
		if f.ByName.ExternalID == f.API.ExternalID {
			c := CaseSame // nothing was collected before, so nothing to verify
			if f.ByName.LastCommitSHA != "" {
				c = CaseForcePush
			}
			// Rename here only fixes letter case: the name matched case-insensitively.
			return Decision{Case: c, Target: f.ByName, Rename: renamed(f.ByName)}, nil
		}
		d := Decision{Case: CaseReplaced, Retire: f.ByName}
		if t := f.ByExternalID; t != nil {
			d.Target, d.Rename, d.Unstale = t, renamed(t), t.Stale
		}
		return d, nil
	}
	switch t := f.ByExternalID; {
	case t == nil:
		return Decision{Case: CaseNew}, nil
	case t.Stale:
		return Decision{Case: CaseReturned, Target: t, Rename: renamed(t), Unstale: true}, nil
	default:
		return Decision{Case: CaseMoved, Target: t, Rename: renamed(t)}, nil
	}
}

// ErrRaceConditionDetected means the repository moved, or was deleted and
// created anew, between the clone and the API lookup: the code that was
// cloned cannot be attributed safely, so the whole resolution must start
// again from the clone.
var ErrRaceConditionDetected = errors.New("identity: repository moved between clone and API lookup")

// CheckRace compares the owner/name that was actually cloned (after
// redirects) with the API's current owner/name, case-insensitively, and
// the time the clone started with the repository's creation: a repository
// created after the clone started is not the one that was cloned, even
// under the same name. A zero time skips that comparison. GitHub's whole
// seconds can hide a re-creation within the clone's second, never invent
// one; a worker clock behind the host's can, and costs a retry.
func CheckRace(clonedOwner, clonedName string, clonedAt time.Time, api Repository) error {
	if !strings.EqualFold(clonedOwner, api.Owner) || !strings.EqualFold(clonedName, api.Name) {
		return fmt.Errorf("%w: cloned %s/%s, API says %s/%s", ErrRaceConditionDetected,
			clonedOwner, clonedName, api.Owner, api.Name)
	}
	if !clonedAt.IsZero() && api.CreatedAt.After(clonedAt) {
		return fmt.Errorf("%w: %s/%s was created at %s, after the clone started at %s", ErrRaceConditionDetected,
			clonedOwner, clonedName, api.CreatedAt.UTC().Format(time.RFC3339), clonedAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
