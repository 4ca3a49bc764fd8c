package blame

// Check is one change check of a sweep's batch: an anonymous listing of a
// repository's refs on its host.
type Check struct {
	// Failed: the listing failed.
	Failed bool `json:"failed,omitempty"`
	// Refused: the host refused this repository (404, 401, 403): it is
	// gone or private — or something between gitfleet and the host (a
	// proxy, a firewall, the host itself) refuses everything, or the
	// repository's owner refuses gitfleet (an organization enforcing SSO
	// or an IP allow-list). Any other failure (a timeout, a 5xx, a TLS or
	// DNS error, an unknown host) is never the repository's.
	Refused bool `json:"refused,omitempty"`
	// Cause names the failure (its class and reason): failures with the
	// same cause are taken for one.
	Cause string `json:"cause,omitempty"`
	// Owner is the repository's owner on the host ("": not known, the
	// owner rule does not apply).
	Owner string `json:"owner,omitempty"`
}

// SharedMin is how many refusals of one cause, in a batch where they are at
// least half the checks, look like the host's outage rather than
// repositories gone each on its own.
const SharedMin = 5

// OwnerSharedMin is how many refusals of one cause among one owner's
// repositories, at least half of that owner's checks in the batch, look like
// the owner refusing gitfleet (SSO enforced, an IP allow-list) rather than
// repositories gone each on its own. A lone refusal is never the owner's:
// it is decided at the host's level.
const OwnerSharedMin = 2

// Decision is whose doing each check of a host's batch is, and which
// control checks the decision still rests on.
type Decision struct {
	// Parties: "" for a check that did not fail.
	Parties []Party
	// NeedHost: some refusals are decided by the host's control check,
	// not made yet; until it is, they count as the host's.
	NeedHost bool
	// NeedOwners: the owners whose control check decides some refusals,
	// not made yet; until it is, they count as the owner's. In the order
	// the checks name them.
	NeedOwners []string
}

// Decide decides whose doing each failed check of one host's batch is.
//
// A failure that is no refusal is the host's. A refusal is looked at twice:
//   - the host's level: when nothing of the batch answered, or the refusal
//     is one of many with the same cause (SharedMin, and half the batch),
//     the host may be refusing everything: the host's control check (hostUp,
//     repositories of the host known to be there; nil: not made) decides,
//     and while the host is down it is the host's;
//   - the owner's level, the host serving: a refusal that is one of several
//     of the same cause among its owner's repositories (OwnerSharedMin, and
//     half the owner's checks) may be the owner refusing gitfleet: the
//     owner's control check (ownerUp[owner], repositories of that owner
//     known to be there; absent: not made) decides, and while the owner
//     does not answer it is the owner's — never each repository's, so an
//     organization's repositories do not leave the sweep because of its
//     SSO or its allow-list.
//
// What is left is the repository's own: gone or private.
func Decide(checks []Check, hostUp *bool, ownerUp map[string]bool) Decision {
	d := Decision{Parties: make([]Party, len(checks))}
	served := false
	refusals := map[string]int{}
	type ownerCause struct{ owner, cause string }
	ownerChecks := map[string]int{}
	ownerRefusals := map[ownerCause]int{}
	for _, c := range checks {
		if c.Owner != "" {
			ownerChecks[c.Owner]++
		}
		switch {
		case !c.Failed:
			served = true
		case c.Refused:
			refusals[c.Cause]++
			if c.Owner != "" {
				ownerRefusals[ownerCause{c.Owner, c.Cause}]++
			}
		}
	}
	hostShared := func(c Check) bool {
		n := refusals[c.Cause]
		return n >= SharedMin && 2*n >= len(checks)
	}
	ownerShared := func(c Check) bool {
		n := ownerRefusals[ownerCause{c.Owner, c.Cause}]
		return c.Owner != "" && n >= OwnerSharedMin && 2*n >= ownerChecks[c.Owner]
	}
	needOwner := map[string]bool{}
	for i, c := range checks {
		switch {
		case !c.Failed:
			continue
		case !c.Refused:
			d.Parties[i] = Host
			continue
		case !served || hostShared(c):
			if hostUp == nil {
				d.Parties[i], d.NeedHost = Host, true
				continue
			}
			if !*hostUp {
				d.Parties[i] = Host
				continue
			}
		}
		// The host serves: the owner's, or the repository's.
		if !ownerShared(c) {
			d.Parties[i] = Repository
			continue
		}
		up, made := ownerUp[c.Owner]
		switch {
		case !made:
			d.Parties[i] = Owner
			if !needOwner[c.Owner] {
				needOwner[c.Owner] = true
				d.NeedOwners = append(d.NeedOwners, c.Owner)
			}
		case up:
			d.Parties[i] = Repository
		default:
			d.Parties[i] = Owner
		}
	}
	return d
}

// Checks decides whose doing each failed check of one host's batch is, as
// Decide does with no owner's control check made; needControl reports that
// the decision rests on a control check (the host's or an owner's).
func Checks(checks []Check, hostUp *bool) (parties []Party, needControl bool) {
	d := Decide(checks, hostUp, nil)
	return d.Parties, d.NeedHost || len(d.NeedOwners) > 0
}
