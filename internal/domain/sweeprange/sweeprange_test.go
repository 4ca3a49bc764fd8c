package sweeprange

import "testing"

// Every split, 1 to Buckets ranges, covers each bucket exactly once: a pass
// of n range sweeps reads every codebase, none twice.
func TestRangesPartitionTheBuckets(t *testing.T) {
	for n := 1; n <= Buckets; n++ {
		seen := make([]int, Buckets)
		for k := range n {
			lo, hi := Range{K: k, N: n}.Buckets()
			if lo >= hi && n <= Buckets {
				t.Fatalf("%d-of-%d is empty: [%d, %d)", k, n, lo, hi)
			}
			for b := lo; b < hi; b++ {
				seen[b]++
			}
		}
		for b, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: bucket %d in %d ranges", n, b, c)
			}
		}
	}
	if lo, hi := (Range{}).Buckets(); lo != 0 || hi != Buckets {
		t.Fatalf("the whole fleet is [%d, %d)", lo, hi)
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct{ fixed, workers, want int }{
		{0, 0, 1}, {0, 1, 1}, {0, 10, 10}, {0, 1000, MaxRanges},
		{4, 0, 4}, {4, 100, 4}, {1, 50, 1}, {5000, 0, MaxRanges},
	} {
		if got := Count(c.fixed, c.workers); got != c.want {
			t.Errorf("Count(%d, %d) = %d, want %d", c.fixed, c.workers, got, c.want)
		}
	}
}

// The ranges' shares of the room add up to the room, whatever the turn: n
// sweeps starting at once start no more than the bound allows.
func TestSharesAddUpToTheRoom(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 16} {
		for room := -3; room <= 40; room++ {
			for turn := range 5 {
				sum := 0
				for k := range n {
					s := Share(room, k, n, turn)
					if s < 0 {
						t.Fatalf("Share(%d, %d, %d, %d) = %d", room, k, n, turn, s)
					}
					sum += s
				}
				if want := max(room, 0); sum != want {
					t.Fatalf("n=%d room=%d turn=%d: shares add up to %d", n, room, turn, sum)
				}
			}
		}
	}
	// A room of 1 among 4 goes to another range each turn.
	got := map[int]bool{}
	for turn := range 4 {
		for k := range 4 {
			if Share(1, k, 4, turn) == 1 {
				got[k] = true
			}
		}
	}
	if len(got) != 4 {
		t.Fatalf("a room of 1 went to ranges %v only", got)
	}
}
