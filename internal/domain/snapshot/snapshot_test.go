package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestValidNames(t *testing.T) {
	for _, tc := range []struct {
		in       string
		name, id bool
	}{
		{"base", true, true},
		{"ubuntu-24.04", true, false},
		{"a_b", true, false},
		{"r1", true, true},
		{"", false, false},
		{"../etc", false, false},
		{"a/b", false, false},
		{"Upper", false, false},
		{"-lead", false, false},
		{".hidden", false, false},
		{"a\x00b", false, false},
		{strings.Repeat("a", 63), true, true},
		{strings.Repeat("a", 64), true, false},
		{strings.Repeat("a", 129), false, false},
	} {
		if err := ValidName(tc.in); (err == nil) != tc.name || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.in, err, tc.name)
		}
		if err := ValidRunnerID(tc.in); (err == nil) != tc.id {
			t.Errorf("ValidRunnerID(%q) = %v, want ok=%v", tc.in, err, tc.id)
		}
	}
}

func TestRepositoryAndPullRef(t *testing.T) {
	for _, tc := range []struct{ ref, repo string }{
		{"127.0.0.1:5000/snap/base:v1", "127.0.0.1:5000/snap/base"},
		{"127.0.0.1:5000/snap/base", "127.0.0.1:5000/snap/base"},
		{"reg.example.com/a/b@sha256:abc", "reg.example.com/a/b"},
		{"reg.example.com:443/a/b:t@sha256:abc", "reg.example.com:443/a/b"},
	} {
		if got := Repository(tc.ref); got != tc.repo {
			t.Errorf("Repository(%q) = %q, want %q", tc.ref, got, tc.repo)
		}
	}
	s := Snapshot{ImageRef: "r:5000/a/b:v1"}
	if s.PullRef() != "r:5000/a/b:v1" {
		t.Errorf("PullRef without digest = %q", s.PullRef())
	}
	s.Digest = "sha256:0f"
	if s.PullRef() != "r:5000/a/b@sha256:0f" {
		t.Errorf("PullRef with digest = %q", s.PullRef())
	}
}

func TestSameSource(t *testing.T) {
	img := Snapshot{Kind: KindImage, ImageRef: "r/a:1"}
	repo := Snapshot{Kind: KindRepo, CodebaseID: 7, Commit: "abc"}
	for _, tc := range []struct {
		a, b Snapshot
		same bool
	}{
		{img, img, true},
		{img, Snapshot{Kind: KindImage, ImageRef: "r/a:2"}, false},
		{repo, repo, true},
		{repo, Snapshot{Kind: KindRepo, CodebaseID: 7, Commit: "abd"}, false},
		{repo, Snapshot{Kind: KindRepo, CodebaseID: 7, Commit: "abc", BaseImage: "r/base:1"}, false},
		{img, repo, false},
	} {
		if got := tc.a.SameSource(tc.b); got != tc.same {
			t.Errorf("%+v SameSource %+v = %v", tc.a, tc.b, got)
		}
	}
}

// The tree: with fan-out f and one registry slot, the registry serves one
// runner, and every later runner pulls from a peer; no peer serves more
// than f at once.
func TestPlannerRegistryEgressIsOneCopy(t *testing.T) {
	for _, tc := range []struct{ runners, fanout int }{{1, 2}, {5, 2}, {10, 3}, {10, 1}, {50, 4}} {
		t.Run(fmt.Sprintf("%d runners fanout %d", tc.runners, tc.fanout), func(t *testing.T) {
			p := NewPlanner(tc.fanout, 1)
			type pull struct{ runner, src string }
			var pending []string
			for i := 0; i < tc.runners; i++ {
				pending = append(pending, fmt.Sprintf("r%d", i))
			}
			fromRegistry, waves := 0, 0
			for len(pending) > 0 {
				waves++
				var started []pull
				for len(pending) > 0 {
					src, ok := p.Assign()
					if !ok {
						break
					}
					if src == "" {
						fromRegistry++
					}
					started = append(started, pull{pending[0], src})
					pending = pending[1:]
				}
				if len(started) == 0 {
					t.Fatal("planner assigned nothing with no pull in flight")
				}
				load := map[string]int{}
				for _, s := range started {
					load[s.src]++
					if s.src != "" && load[s.src] > tc.fanout {
						t.Fatalf("peer %s serves %d pulls, fan-out is %d", s.src, load[s.src], tc.fanout)
					}
				}
				for _, s := range started { // all finish
					p.Release(s.src)
					p.Ready(s.runner)
				}
			}
			if fromRegistry != 1 {
				t.Errorf("%d pulls from the registry, want 1", fromRegistry)
			}
			if tc.runners == 10 && tc.fanout == 3 && waves > 3 {
				t.Errorf("%d waves for 10 runners at fan-out 3", waves)
			}
		})
	}
}

// Pipelined: a runner is a source once its pull starts, so the whole fleet
// starts at once — one pull from the registry, every other from a peer, no
// peer serving more than the fan-out, every source started before the
// pulls it serves (a tree, no cycle). A source whose pull fails is one no
// longer; a ready one stays.
func TestPlannerPipelinedStartsTheFleetAtOnce(t *testing.T) {
	for _, tc := range []struct{ runners, fanout, depth int }{{1, 3, 1}, {4, 3, 2}, {10, 3, 3}, {10, 1, 10}, {50, 4, 4}} {
		t.Run(fmt.Sprintf("%d runners fanout %d", tc.runners, tc.fanout), func(t *testing.T) {
			p := NewPlanner(tc.fanout, 1)
			depth := map[string]int{"": 0}
			load := map[string]int{}
			fromRegistry, deepest := 0, 0
			for i := 0; i < tc.runners; i++ {
				id := fmt.Sprintf("r%d", i)
				src, ok := p.Assign()
				if !ok {
					t.Fatalf("runner %d of %d waits: a pipelined fleet starts at once", i, tc.runners)
				}
				d, started := depth[src]
				if !started {
					t.Fatalf("%s assigned %q, which has not started", id, src)
				}
				if src == "" {
					fromRegistry++
				} else if load[src]++; load[src] > tc.fanout {
					t.Fatalf("peer %s serves %d pulls, fan-out is %d", src, load[src], tc.fanout)
				}
				depth[id] = d + 1
				deepest = max(deepest, d+1)
				p.Pulling(id)
			}
			if fromRegistry != 1 {
				t.Errorf("%d pulls from the registry, want 1", fromRegistry)
			}
			if deepest > tc.depth {
				t.Errorf("a tree %d deep, want at most %d", deepest, tc.depth)
			}
		})
	}
	p := NewPlanner(1, 1)
	if src, _ := p.Assign(); src != "" {
		t.Fatalf("first assign = %q, want the registry", src)
	}
	p.Pulling("a")
	p.Ready("b")
	p.Failed("a")
	p.Failed("b") // ready: stays a source
	if src, ok := p.Assign(); !ok || src != "b" {
		t.Fatalf("assign = %q %v, want b (a failed while pulling)", src, ok)
	}
	if src, ok := p.Assign(); ok {
		t.Fatalf("assign = %q, want none: b serves its fan-out and a is no source", src)
	}
}

func TestPlannerWaitsAndReleases(t *testing.T) {
	p := NewPlanner(1, 2)
	if src, ok := p.Assign(); !ok || src != "" {
		t.Fatalf("first assign = %q %v", src, ok)
	}
	if _, ok := p.Assign(); !ok {
		t.Fatal("second registry slot refused")
	}
	if _, ok := p.Assign(); ok {
		t.Fatal("third registry pull assigned with 2 slots")
	}
	p.Release("")
	p.Ready("r0")
	src, ok := p.Assign()
	if !ok || src != "r0" {
		t.Fatalf("with r0 ready, assign = %q %v, want r0", src, ok)
	}
	if _, ok := p.Assign(); ok {
		t.Fatal("registry used while a peer is ready, or r0 over fan-out")
	}
	p.Release("r0")
	if src, ok := p.Assign(); !ok || src != "r0" {
		t.Fatalf("after release, assign = %q %v", src, ok)
	}
}

func TestReconcile(t *testing.T) {
	rows := []Row{
		{SnapshotRef: "gone", State: RowReady},
		{SnapshotRef: "fine", State: RowReady},
		{SnapshotRef: "swapped", State: RowReady},
		{SnapshotRef: "leaving", State: RowRemoving},
		{SnapshotRef: "coming", State: RowPulling},
		{SnapshotRef: "broken", State: RowError},
	}
	digests := map[string]string{"fine": "sha256:1", "swapped": "sha256:2"}
	held := []Held{{"fine", "sha256:1"}, {"swapped", "sha256:9"}, {"leaving", "sha256:3"}, {"orphan", "sha256:4"}, {"coming", "sha256:5"}}
	got := Reconcile(rows, digests, held)
	want := []Action{{FixRepull, "gone"}, {FixFinishRemoval, "leaving"}, {FixRemoveImage, "orphan"}, {FixRepull, "swapped"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Reconcile = %v\nwant        %v", got, want)
	}
}

func TestRetryBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := []Row{
		{SnapshotRef: "a", State: RowError, ErrorReason: ReasonOffline, UpdatedAt: t0},
		{SnapshotRef: "b", State: RowError, ErrorReason: ReasonTimeout, UpdatedAt: t0, Retries: 3},
		{SnapshotRef: "c", State: RowError, ErrorReason: "image exceeds store quota", UpdatedAt: t0},
		{SnapshotRef: "d", State: RowError, ErrorReason: TransientReason("network"), UpdatedAt: t0, Retries: 20},
		{SnapshotRef: "e", State: RowReady, UpdatedAt: t0},
	}
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{
		{0, ""},
		{time.Minute, "a"},
		{8 * time.Minute, "ab"},
		{time.Hour, "abd"},
	} {
		var got string
		for _, r := range DueForRetry(rows, t0.Add(tc.after), time.Minute) {
			got += r.SnapshotRef
		}
		if got != tc.want {
			t.Errorf("due after %v = %q, want %q", tc.after, got, tc.want)
		}
	}
}

// The reconcile's reads race the runners' pulls; Check decides only what
// the order rows, images, rows proves.
func TestCheckActsOnlyOnWhatTheReadsProve(t *testing.T) {
	ready := func(name string, v int64) Row { return Row{SnapshotRef: name, State: RowReady, Version: v} }
	pulling := func(name string, v int64) Row { return Row{SnapshotRef: name, State: RowPulling, Version: v} }
	for _, tc := range []struct {
		name          string
		before, after []Row
		held          []Held
		want          []Action
	}{
		{"in agreement", []Row{ready("a", 1)}, []Row{ready("a", 1)}, []Held{{"a", "sha256:a"}}, nil},
		{"image lost", []Row{ready("a", 1)}, []Row{ready("a", 1)}, nil, []Action{{FixRepull, "a"}}},
		{"another image under the name", []Row{ready("a", 1)}, []Row{ready("a", 1)}, []Held{{"a", "sha256:x"}}, []Action{{FixRepull, "a"}}},
		{"orphan image", nil, nil, []Held{{"o", "sha256:o"}}, []Action{{FixRemoveImage, "o"}}},
		// A snapshot whose row was added, pulled and made ready between
		// the first read and the listing: its image is not an orphan.
		{"pulled between the reads", nil, []Row{ready("n", 2)}, []Held{{"n", "sha256:n"}}, nil},
		// Ready only after the listing: the image may have been recorded
		// after it, so its absence proves nothing.
		{"ready after the listing", []Row{pulling("p", 1)}, []Row{ready("p", 2)}, nil, nil},
		// Ready at both reads but changed in between (pulled again).
		{"ready again in between", []Row{ready("r", 1)}, []Row{ready("r", 3)}, nil, nil},
		{"in flight", []Row{pulling("f", 1)}, []Row{pulling("f", 1)}, []Held{{"f", "sha256:f"}}, nil},
		{"removal left over", []Row{{SnapshotRef: "x", State: RowRemoving}}, []Row{{SnapshotRef: "x", State: RowRemoving}},
			[]Held{{"x", "sha256:x"}}, []Action{{FixFinishRemoval, "x"}}},
		{"row gone after the listing", []Row{ready("g", 1)}, nil, []Held{{"g", "sha256:g"}}, []Action{{FixRemoveImage, "g"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check{Before: tc.before, After: tc.after, Held: tc.held,
				Digests: map[string]string{"a": "sha256:a", "n": "sha256:n"}}.Actions()
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Actions = %v, want %v", got, tc.want)
			}
		})
	}
}

// A failed build is retried by the reconcile as its cause allows, but only
// MaxBuildRetries times since the row was last ready: then it waits for an
// operator instead of costing a build every hour for ever.
func TestFailedBuildsAreRetriedABoundedNumberOfTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		reason  string
		retries int
		due     bool
	}{
		{BuildFailure(ReasonBuildTimeout), 0, true},
		{BuildFailure(ReasonBuildTimeout), MaxBuildRetries - 1, true},
		{BuildFailure(ReasonBuildTimeout), MaxBuildRetries, false},
		{BuildFailure(TransientReason("fetch: connection reset")), MaxBuildRetries, false},
		{BuildFailure(ReasonOffline), 1, true},
		{BuildFailure("commit abc is not in h/o/r"), 0, false},
		{ReasonTimeout, 20, true}, // a pull: retried for as long as it fails
	} {
		r := Row{SnapshotRef: "s", State: RowError, ErrorReason: tc.reason, Retries: tc.retries, UpdatedAt: t0}
		if got := len(DueForRetry([]Row{r}, t0.Add(2*time.Hour), time.Minute)) == 1; got != tc.due {
			t.Errorf("%q after %d retries: due = %v, want %v", tc.reason, tc.retries, got, tc.due)
		}
	}
}
