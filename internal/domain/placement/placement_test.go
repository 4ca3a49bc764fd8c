package placement

import (
	"fmt"
	"slices"
	"testing"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("github.com/acme/repo-%d", i)
	}
	return out
}

func TestOwnerIsTheFirstOfTheRank(t *testing.T) {
	workers := []string{"w1", "w2", "w3", "w4"}
	for _, k := range keys(200) {
		r := Rank(k, workers)
		if len(r) != len(workers) || r[0] != Owner(k, workers) {
			t.Fatalf("%s: rank %v, owner %s", k, r, Owner(k, workers))
		}
		// The order of the workers given does not matter.
		if o := Owner(k, []string{"w4", "w3", "w2", "w1"}); o != r[0] {
			t.Fatalf("%s: owner %s given the workers reversed, %s in order", k, o, r[0])
		}
	}
	if Owner("x", nil) != "" || len(Rank("x", nil)) != 0 {
		t.Fatal("no workers, yet an owner")
	}
}

// Repositories spread evenly, and a worker joining or leaving moves only
// the repositories it takes or held: each to the next in its rank.
func TestSpreadAndMoves(t *testing.T) {
	ks := keys(30000)
	for _, tc := range []struct {
		before, after []string
	}{
		{[]string{"w1", "w2", "w3"}, []string{"w1", "w2", "w3", "w4"}},                         // joins
		{[]string{"w1", "w2", "w3", "w4", "w5", "w6"}, []string{"w1", "w2", "w4", "w5", "w6"}}, // leaves
	} {
		share := map[string]int{}
		moved := 0
		for _, k := range ks {
			b, a := Owner(k, tc.before), Owner(k, tc.after)
			share[a]++
			if a != b {
				moved++
				// Only to the newcomer, or away from the one that left, to
				// the next in its rank.
				left := !slices.Contains(tc.after, b)
				if !(a == newcomer(tc.before, tc.after) || left && a == Rank(k, tc.before)[1]) {
					t.Fatalf("%s moved from %s to %s", k, b, a)
				}
			}
		}
		n := len(tc.after)
		mean := len(ks) / n
		for w, c := range share {
			if float64(c) > 1.1*float64(mean) || float64(c) < 0.9*float64(mean) {
				t.Errorf("%v: %s owns %d, mean %d", tc.after, w, c, mean)
			}
		}
		want := len(ks) / max(len(tc.before), len(tc.after))
		if float64(moved) > 1.15*float64(want) {
			t.Errorf("%v → %v moved %d of %d, want about %d", tc.before, tc.after, moved, len(ks), want)
		}
	}
}

func newcomer(before, after []string) string {
	for _, w := range after {
		if !slices.Contains(before, w) {
			return w
		}
	}
	return ""
}
