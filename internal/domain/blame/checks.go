package blame

// Check is one change check of a sweep's batch: an anonymous listing of a
// repository's refs on its host.
type Check struct {
	// Failed: the listing failed.
	Failed bool `json:"failed,omitempty"`
	// Refused: the host refused this repository (404, 401, 403): it is
	// gone or private — or something between gitfleet and the host (a
	// proxy, a firewall, the host itself) refuses everything. Any other
	// failure (a timeout, a 5xx, a TLS or DNS error, an unknown host) is
	// never the repository's.
	Refused bool `json:"refused,omitempty"`
	// Cause names the failure (its class and reason): failures with the
	// same cause are taken for one.
	Cause string `json:"cause,omitempty"`
}

// SharedMin is how many refusals of one cause, in a batch where they are at
// least half the checks, look like the host's outage rather than
// repositories gone each on its own.
const SharedMin = 5

// Checks decides whose doing each failed check of one host's batch is (""
// for a check that did not fail). A refusal is the repository's only when
// the host is seen serving other repositories at the same time: a check of
// the batch succeeded and the refusal is not one of many with the same
// cause (SharedMin, and half the batch), or else a control check of a
// repository known to be there succeeded. hostUp is what the control check
// found (nil: not made yet); needControl reports that the decision rests on
// one, in which case, until it is made, those refusals count as the host's.
// Every other failure is the host's.
func Checks(checks []Check, hostUp *bool) (parties []Party, needControl bool) {
	parties = make([]Party, len(checks))
	served := false
	refusals := map[string]int{}
	for _, c := range checks {
		switch {
		case !c.Failed:
			served = true
		case c.Refused:
			refusals[c.Cause]++
		}
	}
	shared := func(cause string) bool {
		n := refusals[cause]
		return n >= SharedMin && 2*n >= len(checks)
	}
	for i, c := range checks {
		switch {
		case !c.Failed:
			continue
		case !c.Refused:
			parties[i] = Host
		case served && !shared(c.Cause):
			parties[i] = Repository
		case hostUp == nil:
			parties[i], needControl = Host, true
		case *hostUp:
			parties[i] = Repository
		default:
			parties[i] = Host
		}
	}
	return parties, needControl
}
