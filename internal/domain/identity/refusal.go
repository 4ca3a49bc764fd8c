package identity

import "strings"

// Refusal says what it means that the git host refused to serve a name
// (404, or 401 to an anonymous request, as GitHub answers both for unknown
// and for private repositories), once the API was asked.
type Refusal string

const (
	// RefusedGone: the codebase's repository is unknown to the API by id
	// (and so by name), asked with a token that sees every repository of
	// the host wherever it went (a site administrator's): it no longer
	// exists. Mark the codebase stale.
	RefusedGone Refusal = "gone"
	// RefusedInaccessible: the codebase's repository is unknown to the API
	// by id, but the API was asked without a token that sees every
	// repository of the host: it was deleted, made private or transferred
	// to an account the token cannot see, and the answer cannot tell which
	// (the owner's installation, or a member's token, does not see where a
	// transferred repository went). The codebase is kept (inaccessible), never
	// deleted for it: a repository is often hidden exactly when it leaked.
	RefusedInaccessible Refusal = "inaccessible"
	// RefusedMoved: the repository lives under another owner/name now
	// (the host kept no redirect): collect it there, which resolves as D.
	RefusedMoved Refusal = "moved"
	// RefusedPrivate: the API sees the repository and says it is private;
	// git refuses gitfleet's anonymous fetch. A codebase is kept
	// (inaccessible).
	RefusedPrivate Refusal = "private"
	// RefusedNotFound: no codebase holds the name and the API does not know
	// it: it does not exist (or is private and the API has no token).
	RefusedNotFound Refusal = "not found"
	// RefusedDenied: the API says the repository is public and where it was
	// asked for, yet git refused it.
	RefusedDenied Refusal = "denied"
)

// ExplainRefusal decides what a refused fetch of owner/name means. byName
// is the codebase known by the name (live, else the latest stale; nil when
// none), byID the API's answer for that codebase's external id, and
// byNameAPI its answer for owner/name (nil: 404, or not asked). The id is
// asked first: it follows renames and transfers, and it alone says whether
// the codebase's repository still exists — when provesGone, the 404 for the
// id came from a token that sees every repository of the host wherever it
// went, so that it is proof; otherwise the repository may as well be
// private now, or under an account the token cannot see. It returns the
// repository the decision rests on (nil for gone, inaccessible and not
// found).
func ExplainRefusal(owner, name string, byName *Codebase, byID, byNameAPI *Repository, provesGone bool) (Refusal, *Repository) {
	repo := byNameAPI
	if byName != nil {
		if byID == nil && provesGone {
			return RefusedGone, nil
		}
		if byID == nil {
			return RefusedInaccessible, nil
		}
		repo = byID
	}
	switch {
	case repo == nil:
		return RefusedNotFound, nil
	case repo.Private:
		return RefusedPrivate, repo
	case !strings.EqualFold(repo.Owner, owner) || !strings.EqualFold(repo.Name, name):
		return RefusedMoved, repo
	}
	return RefusedDenied, repo
}
