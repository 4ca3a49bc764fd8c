package ghaccount

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"gitfleet/internal/domain/textsafe"
)

// Org is a GitHub organization.
type Org struct {
	ID          int64  `json:"id"`
	Login       string `json:"login"`
	Description string `json:"description,omitempty"`
}

// SourceType says where a user's repository comes from.
type SourceType string

const (
	Personal     SourceType = "personal"
	Organization SourceType = "organization"
)

// Repo is a repository as one user sees it.
type Repo struct {
	ID    int64  `json:"id"`
	Owner string `json:"owner"`
	// OwnerID is the owner's GitHub id: the organization's, for Organization.
	OwnerID       int64      `json:"owner_id"`
	Name          string     `json:"name"`
	Source        SourceType `json:"source_type"`
	Visibility    string     `json:"visibility"`
	DefaultBranch string     `json:"default_branch,omitempty"`
	Archived      bool       `json:"archived"`
	Fork          bool       `json:"fork"`
	PushedAt      time.Time  `json:"pushed_at,omitzero"`
	// ByName: the user sees it only through an organization asked for by
	// name (OrgList), not in /user/repos: it belongs to that
	// organization's view, not to the user's list.
	ByName bool `json:"by_name,omitempty"`
}

// FullName is owner/name.
func (r Repo) FullName() string { return r.Owner + "/" + r.Name }

// The lists a user's cache holds.
const (
	ListOrgs  = "orgs"  // the user's organizations
	ListRepos = "repos" // every repository the user can see through membership or ownership
)

// OrgList is the list of an organization's repositories, for organizations
// the user asks about by name (public repositories of an organization the
// user is no member of are in no other list).
func OrgList(login string) string { return "org:" + strings.ToLower(login) }

// OrgOfList returns the organization of an OrgList, or "".
func OrgOfList(list string) string {
	org, ok := strings.CutPrefix(list, "org:")
	if !ok {
		return ""
	}
	return org
}

// Page is one fetched page of a list, with the validators that make the
// next fetch of it conditional.
type Page struct {
	URL          string
	ETag         string
	LastModified string
	// Next is the URL of the following page ("" on the last): a 304
	// carries no Link header, so the stored page remembers it.
	Next string
	Body []byte
	// FetchedAt is when it was fetched (or found unchanged) last.
	FetchedAt time.Time
}

// View is everything one refresh learned about an account: it replaces the
// cached view whole.
type View struct {
	// Orgs are the organizations the user is a member of.
	Orgs  []Org
	Repos []Repo
	// Lists are the lists fetched; Pages the pages they came in.
	Lists []string
	Pages []Page
	// Missing are the lists of organizations asked for by name that do
	// not exist: dropped from the user's cache.
	Missing []string
	// Joined are the lists of organizations asked for by name that the
	// user is now a member of: dropped too, the user's own list holds
	// their repositories.
	Joined []string
	// Refused are the lists of organizations asked for by name that
	// refused the token: they keep what they held (their stored pages are
	// in Pages and their repositories in Repos), and say why.
	Refused []Refusal
}

// Refusal is an organization's list that GitHub refused, and why, for
// people.
type Refusal struct {
	List   string
	Reason string
}

// RefusalReason says why an organization refused a user's token, from
// GitHub's 403 message, and what to do about it.
func RefusalReason(org, message string) string {
	switch m := strings.ToLower(message); {
	case strings.Contains(m, "saml"):
		return fmt.Sprintf("%s enforces SAML single sign-on: authorize the token for the organization (GitHub: Settings, Developer settings, the token, Configure SSO), then refresh", org)
	case strings.Contains(m, "ip allow list"):
		return fmt.Sprintf("%s has an IP allow list that does not admit this worker's address: ask its owners to allow it, then refresh", org)
	case message == "":
		return fmt.Sprintf("%s refused the token (403)", org)
	}
	if len(message) > 200 {
		message = message[:200] + "…"
	}
	return fmt.Sprintf("%s refused the token (403): %s", org, textsafe.Printable(message))
}

// TokenRefused says that GitHub refused a user's token (401: revoked,
// expired) at a time, that it is not tried again, and what to do: the
// message of every refresh of the user until the token is replaced.
func TokenRefused(user string, at time.Time) string {
	return fmt.Sprintf("GitHub refused user %s's token (401: revoked or expired) at %s; it is not tried again until it is replaced: run `starter users add %s` with a new token",
		user, at.UTC().Format("2006-01-02 15:04 MST"), user)
}

// Merge joins repository lists that may overlap (an organization's
// repository is both in the user's list and the organization's) into one,
// each repository once, sorted by full name as GitHub sorts.
func Merge(lists ...[]Repo) []Repo {
	seen := map[int64]bool{}
	var out []Repo
	for _, l := range lists {
		for _, r := range l {
			if !seen[r.ID] {
				seen[r.ID] = true
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b Repo) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.FullName()), strings.ToLower(b.FullName())), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Filter selects cached repositories.
type Filter struct {
	// Org keeps only repositories owned by this organization (any case),
	// those of its view asked for by name included; without it, the
	// user's own list (no ByName repository).
	Org string
	// IncludeArchived keeps archived repositories too.
	IncludeArchived bool
}

// Match reports whether r passes the filter.
func (f Filter) Match(r Repo) bool {
	if f.Org != "" && !strings.EqualFold(r.Owner, f.Org) || f.Org == "" && r.ByName {
		return false
	}
	return f.IncludeArchived || !r.Archived
}

// Age says how old cached data is, for people: "cached 3h ago".
func Age(refreshed, now time.Time) string {
	if refreshed.IsZero() {
		return "never fetched"
	}
	d := now.Sub(refreshed)
	switch {
	case d < time.Minute:
		return "cached just now"
	case d < time.Hour:
		return fmt.Sprintf("cached %dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("cached %dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("cached %dd ago", int(d/(24*time.Hour)))
}
