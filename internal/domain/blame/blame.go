package blame

// Party is who a failure is charged to.
type Party string

const (
	// Repository: the repository's own doing; it counts toward its
	// failures in a row.
	Repository Party = "repository"
	// Host: the host's or the infrastructure's; it counts toward the
	// sweep's circuit breaker and against no repository.
	Host Party = "host"
	// Owner: the repository's owner refuses gitfleet (an organization
	// enforcing SSO or an IP allow-list): it counts toward the sweep's
	// breaker for that owner, against no repository and not the host.
	Owner Party = "owner"
)

// The reasons a collection's verdict about a repository fails with. An error
// carrying one of them says what the repository is, not what went wrong on
// the way to it.
const (
	// ReasonGone: the API does not know the repository's id, asked with a
	// token that sees every repository of the host wherever it went (a
	// site administrator's).
	ReasonGone = "gone"
	// ReasonPrivate: the API sees the repository and it is private; git
	// refuses gitfleet's anonymous fetch.
	ReasonPrivate = "private"
	// ReasonInaccessible: git refuses the repository and the API does not
	// know its id, but no token asked sees every account of the host:
	// deleted, made private or transferred out of sight, gitfleet cannot
	// tell.
	ReasonInaccessible = "inaccessible"
	// ReasonCorrupt: the repository's data is damaged (errclass's
	// ReasonCorrupt, a shard's park reason): fetching it again gives the
	// same data.
	ReasonCorrupt = "corrupt repository"
)

// Strikes reports whether a collection that failed with class and reason
// counts toward the repository's failures in a row: only a Permanent
// verdict about the repository itself does. A refusal nobody explained (the
// API was not reachable to ask), an expired token, a database outage, a
// timeout, a cancel, a scan that ran out of budget: none does.
func Strikes(class, reason string) bool {
	if class != "Permanent" {
		return false
	}
	switch reason {
	case ReasonGone, ReasonPrivate, ReasonInaccessible, ReasonCorrupt:
		return true
	}
	return false
}
