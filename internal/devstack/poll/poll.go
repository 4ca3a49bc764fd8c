// Package poll waits in tests for a state nothing signals (a row a runner
// writes, a goroutine's exit, a workflow's queried phase): it asks again
// until the answer is yes or a deadline passes. The deadline bounds the
// wait and the interval only spaces the questions, so a slow machine waits
// longer but never gets another outcome.
package poll

import (
	"testing"
	"time"
)

// Interval spaces the questions.
const Interval = 20 * time.Millisecond

// Until calls f until it reports done, and fails the test with what and
// f's last description if it has not within the given time.
func Until(t testing.TB, what string, within time.Duration, f func() (done bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		done, last := f()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, within, last)
		}
		<-tick.C
	}
}
