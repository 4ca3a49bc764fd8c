package blame

import (
	"fmt"
	"testing"
)

func TestStrikes(t *testing.T) {
	for _, tc := range []struct {
		class, reason string
		want          bool
	}{
		{"Permanent", ReasonGone, true},
		{"Permanent", ReasonPrivate, true},
		{"Permanent", ReasonInaccessible, true},
		{"Permanent", ReasonCorrupt, true},
		// Raw refusals nobody explained, tokens, the database, budgets.
		{"Permanent", "not found", false},
		{"Permanent", "permission denied", false},
		{"Permanent", "unsupported", false},
		{"Permanent", "database rejected the statement", false},
		{"Permanent", "poisoned", false},
		{"Permanent", "too many errors", false},
		{"Retryable", ReasonGone, false},
		{"Retryable", "database unavailable", false},
		{"Retryable", "", false},
		{"StaleOwner", "stale fence", false},
	} {
		if got := Strikes(tc.class, tc.reason); got != tc.want {
			t.Errorf("Strikes(%q, %q) = %v, want %v", tc.class, tc.reason, got, tc.want)
		}
	}
}

func ok() Check                  { return Check{} }
func refused(cause string) Check { return Check{Failed: true, Refused: true, Cause: cause} }
func broken(cause string) Check  { return Check{Failed: true, Cause: cause} }

func times(n int, c Check) []Check {
	out := make([]Check, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func TestChecks(t *testing.T) {
	const (
		notFound = "Permanent/not found"
		denied   = "Permanent/permission denied"
		tls      = "Permanent/unsupported"
		timeout  = "Retryable/interrupted"
	)
	yes, no := true, false
	for _, tc := range []struct {
		name        string
		checks      []Check
		hostUp      *bool
		want        string // one letter a check: . ok, R repository, H host
		needControl bool
	}{
		{"all fine", []Check{ok(), ok()}, nil, "..", false},
		{"one gone among answers", []Check{ok(), refused(notFound), ok()}, nil, ".R.", false},
		{"a few gone and private among answers", []Check{ok(), refused(notFound), refused(denied), refused(notFound), ok()}, nil, ".RRR.", false},
		// Failures that are never a repository's, whatever the others do.
		{"timeouts, TLS, 5xx", []Check{ok(), broken(timeout), broken(tls), broken("Retryable/server error 503")}, nil, ".HHH", false},
		{"TLS everywhere", times(4, broken(tls)), nil, "HHHH", false},
		// A refusal with nothing answering: a control check decides.
		{"a lone refusal", []Check{refused(notFound)}, nil, "H", true},
		{"a lone refusal, host up", []Check{refused(notFound)}, &yes, "R", false},
		{"a lone refusal, host down", []Check{refused(notFound)}, &no, "H", false},
		{"every one refused", times(50, refused(notFound)), nil, "HHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHH", true},
		{"every one refused, host down", times(6, refused(denied)), &no, "HHHHHH", false},
		// Many refusals of one cause look like the host's even when some
		// repositories answer: the control check decides.
		{"most refused alike", append(times(6, refused(denied)), ok(), ok()), nil, "HHHHHH..", true},
		{"most refused alike, host up", append(times(6, refused(denied)), ok(), ok()), &yes, "RRRRRR..", false},
		{"most refused alike, host down", append(times(6, refused(denied)), ok(), ok()), &no, "HHHHHH..", false},
		// Below SharedMin, or under half the batch: repositories' own.
		{"four refused alike", append(times(4, refused(denied)), ok()), nil, "RRRR.", false},
		{"six refused of many", append(times(6, refused(notFound)), times(7, ok())...), nil, "RRRRRR.......", false},
		{"mixed causes", append(append(times(5, refused(notFound)), times(5, refused(denied))...), ok()), nil, "RRRRRRRRRR.", false},
		{"a timeout and a refusal, nothing answered", []Check{broken(timeout), refused(notFound)}, &no, "HH", false},
	} {
		parties, need := Checks(tc.checks, tc.hostUp)
		got := ""
		for _, p := range parties {
			got += map[Party]string{"": ".", Repository: "R", Host: "H"}[p]
		}
		if got != tc.want || need != tc.needControl {
			t.Errorf("%s: %s (control needed %v), want %s (%v)", tc.name, got, need, tc.want, tc.needControl)
		}
	}
}

func ExampleChecks() {
	// A proxy answers 403 for every repository of a batch.
	batch := times(3, refused("Permanent/permission denied"))
	parties, needControl := Checks(batch, nil)
	fmt.Println(parties, needControl)
	down := false
	parties, _ = Checks(batch, &down) // the control repository is refused too
	fmt.Println(parties)
	// Output:
	// [host host host] true
	// [host host host]
}

func of(owner string, c Check) Check { c.Owner = owner; return c }

func ofAll(owner string, cs ...Check) []Check {
	out := make([]Check, len(cs))
	for i, c := range cs {
		out[i] = of(owner, c)
	}
	return out
}

// Refusals shared by one owner's repositories (an organization enforcing SSO
// or an IP allow-list) are decided by that owner's control check and, while
// it does not answer, are the owner's: not the repositories' (they would
// leave the sweep after 5 sweeps) and not the host's (it serves the others).
func TestDecideOwners(t *testing.T) {
	const denied, notFound = "Permanent/permission denied", "Permanent/not found"
	yes, no := true, false
	// The issue's batch: 20 repositories, 9 of them an organization's,
	// every one of those refused alike; the others answer.
	sso := append(ofAll("org", times(9, refused(denied))...), ofAll("others", times(11, ok())...)...)
	for _, tc := range []struct {
		name       string
		checks     []Check
		hostUp     *bool
		ownerUp    map[string]bool
		want       string // . ok, R repository, H host, O owner
		needHost   bool
		needOwners string
	}{
		{"an organization refusing 9 of 20", sso, nil, nil, "OOOOOOOOO...........", false, "org"},
		{"an organization refusing 9 of 20, its known repositories refused too", sso, nil, map[string]bool{"org": false},
			"OOOOOOOOO...........", false, ""},
		{"an organization's 9 of 20 gone, its known repositories answer", sso, nil, map[string]bool{"org": true},
			"RRRRRRRRR...........", false, ""},
		// A lone refusal is decided on the host's level, as before.
		{"one refused of its owner's three", append(ofAll("a", refused(notFound), ok(), ok()), ofAll("b", ok())...), nil, nil,
			"R...", false, ""},
		// Under half the owner's checks: the repositories' own.
		{"two refused of an owner's five", ofAll("a", refused(notFound), refused(notFound), ok(), ok(), ok()), nil, nil,
			"RR...", false, ""},
		{"two refused alike of an owner's four", append(ofAll("a", refused(denied), refused(denied), ok(), ok()), ofAll("b", ok())...),
			nil, nil, "OO...", false, "a"},
		// Different causes are different failures.
		{"an owner's two refusals of two causes", append(ofAll("a", refused(denied), refused(notFound)), ofAll("b", ok())...),
			nil, nil, "RR.", false, ""},
		// The host refusing everything stays the host's, whatever the owners.
		{"the host refuses every owner", append(ofAll("a", times(3, refused(denied))...), ofAll("b", times(3, refused(denied))...)...),
			nil, nil, "HHHHHH", true, ""},
		{"the host refuses every owner, host down", append(ofAll("a", times(3, refused(denied))...), ofAll("b", times(3, refused(denied))...)...),
			&no, nil, "HHHHHH", false, ""},
		// Nothing answered but the host does: then the owners decide.
		{"nothing answered, host up", append(ofAll("a", times(3, refused(denied))...), ofAll("b", refused(notFound))...),
			&yes, nil, "OOOR", false, "a"},
		{"nothing answered, host up, the owner answers", append(ofAll("a", times(3, refused(denied))...), ofAll("b", refused(notFound))...),
			&yes, map[string]bool{"a": true}, "RRRR", false, ""},
		// Timeouts are the host's, whoever the owner.
		{"an owner's timeouts", append(ofAll("a", broken("Retryable/interrupted"), broken("Retryable/interrupted")), ofAll("b", ok())...),
			nil, nil, "HH.", false, ""},
	} {
		d := Decide(tc.checks, tc.hostUp, tc.ownerUp)
		got := ""
		for _, p := range d.Parties {
			got += map[Party]string{"": ".", Repository: "R", Host: "H", Owner: "O"}[p]
		}
		needOwners := ""
		for i, o := range d.NeedOwners {
			if i > 0 {
				needOwners += ","
			}
			needOwners += o
		}
		if got != tc.want || d.NeedHost != tc.needHost || needOwners != tc.needOwners {
			t.Errorf("%s: %s (host control %v, owners' %q), want %s (%v, %q)", tc.name, got, d.NeedHost, needOwners,
				tc.want, tc.needHost, tc.needOwners)
		}
	}
}

// Each host and each owner has its own breaker: a dead host's failures in a
// row halt it whatever lies between them, a healthy host goes on, an
// owner's failures halt that owner only.
func TestBreakers(t *testing.T) {
	type event struct {
		host, owner string
		what        byte // 'F' host failure, 'O' owner failure, 'S' success
	}
	dead := func(owner string) event { return event{"dead.example", owner, 'F'} }
	fine := func(owner string) event { return event{"fine.example", owner, 'S'} }
	for _, tc := range []struct {
		name   string
		events []event
		halts  string // for each event: h halted by it, - not, x already halted (skipped)
	}{
		{"a dead host interleaved with a healthy one", []event{dead("a"), fine("b"), dead("a"), fine("b"), dead("a"), fine("b"), dead("a"), fine("b")},
			"----h-x-"},
		{"a dead host adjacent to a healthy one", []event{dead("a"), dead("a"), dead("a"), dead("a"), fine("b"), fine("b")}, "--hx--"},
		{"a success of the same host ends the streak", []event{dead("a"), dead("a"), {"dead.example", "c", 'S'}, dead("a"), dead("a"), dead("a")},
			"-----h"},
		{"an owner refusing gitfleet", []event{{"gh", "org", 'O'}, fine("x"), {"gh", "org", 'O'}, {"gh", "other", 'S'}, {"gh", "org", 'O'},
			{"gh", "org", 'S'}, {"gh", "other", 'S'}}, "----hx-"},
		{"owners are case-insensitive", []event{{"gh", "Org", 'O'}, {"gh", "org", 'O'}, {"GH", "ORG", 'O'}}, "--h"},
	} {
		b := Breakers{}
		got := ""
		for _, e := range tc.events {
			switch {
			case b.Halted(e.host, e.owner):
				got += "x"
				continue
			case e.what == 'S':
				b.Succeed(HostKey(e.host), OwnerKey(e.host, e.owner))
				got += "-"
				continue
			}
			key := HostKey(e.host)
			if e.what == 'O' {
				key = OwnerKey(e.host, e.owner)
			}
			if b.Fail(key) {
				got += "h"
			} else {
				got += "-"
			}
		}
		if got != tc.halts {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.halts)
		}
	}
}
