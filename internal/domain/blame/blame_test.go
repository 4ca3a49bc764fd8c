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
