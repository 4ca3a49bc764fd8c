package activities_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"gitfleet/activities"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// reasonOf is the class and reason an activity's error carries.
func reasonOf(t *testing.T, err error) (string, string) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("not an ApplicationError: %v", err)
	}
	var reason string
	if app.HasDetails() {
		if err := app.Details(&reason); err != nil {
			t.Fatal(err)
		}
	}
	return app.Type(), reason
}

// A scan of a repository holding a delta bomb and nothing else, local or
// fetched, is refused: Permanent with the limit it went over (the workflow
// parks the shard on it), within bounded memory (the nested bomb asks for
// 65 GiB). The scan reads around the bomb as a hole and refuses the
// repository because nothing else could be read (beside readable files it
// is only a hole: TestOneRefusedObjectHidesNothing,
// TestFetchedRefusedObjectHidesNothing). Local, a delta cycle is walked
// (the walk reads the size at its top alone) and refused when its blob is
// read. Fetched, the indexer leaves the bomb out of the pack's index and
// records why beside it: the walk meets it refused, with the same limit
// (a cycle's is the delta chain's, as local; before issue 31 the fetched
// cycle was a corrupt pack).
func TestScanShardRefusesDeltaBombs(t *testing.T) {
	s := shards(t, time.Minute, 100)
	var err error
	if s.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		crafted *gittest.Crafted
		fetched bool
		reason  string
	}{
		{gittest.NestedDeltas(1<<30, 64<<30), false, "over a limit: object size"},
		{gittest.NestedDeltas(1<<30, 64<<30), true, "over a limit: object size"},
		{gittest.HugeDeclaredSize(), false, "over a limit: object size"},
		{gittest.HugeDeclaredSize(), true, "over a limit: object size"},
		{gittest.DeltaCycle(), false, "over a limit: delta chain"},
		{gittest.DeltaCycle(), true, "over a limit: delta chain"},
	} {
		name := tt.crafted.Name + map[bool]string{false: "/local", true: "/fetched"}[tt.fetched]
		t.Run(name, func(t *testing.T) {
			spec := shard.Spec{Key: "hostile:" + name}
			if tt.fetched {
				ts := httptest.NewServer(&gittest.PackServer{Pack: tt.crafted.Bytes(), Commit: tt.crafted.Commit})
				defer ts.Close()
				spec.Target = target.Target{Location: ts.URL + "/evil/bomb"}
			} else {
				dir := filepath.Join(t.TempDir(), "bomb.git")
				tt.crafted.Write(t, dir)
				spec.Target = target.Target{Location: dir, Local: true}
			}
			id, err := s.EnsureShard(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = s.ScanShard(context.Background(), workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec})
			runtime.ReadMemStats(&after)
			class, reason := reasonOf(t, err)
			t.Logf("%v (%d KiB allocated)", err, (after.TotalAlloc-before.TotalAlloc)>>10)
			if class != string(errclass.Permanent) || reason != tt.reason {
				t.Fatalf("%s %q, want Permanent %q", class, reason, tt.reason)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 128<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
		})
	}
}

// One crafted object of each kind (the nested delta bomb, a delta
// declaring 2^40 bytes, a delta cycle, a tree nested 5,000 deep) beside
// two ordinary secrets, in one commit (issue 31): the scan reads around
// each refused object — a hole, lost, with the limit as its reason —
// finds both secrets, and finalizes a Partial run that counts the
// refusals; nothing is refused as a whole, so the shard is not parked.
// (Before: the first refusal stopped the scan, Permanent, and neither
// secret was reported.)
func TestOneRefusedObjectHidesNothing(t *testing.T) {
	s := shards(t, time.Minute, 100)
	dir := filepath.Join(t.TempDir(), "one-of-each.git")
	oneOfEach().Write(t, dir)
	spec, shardID := localShard(t, s, dir)
	refusedReadAround(t, s, spec, shardID)
}

// oneOfEach is the repository of issue 31: one crafted object of each
// kind beside two ordinary secrets.
func oneOfEach() *gittest.Crafted {
	files := map[string]string{"ci.env": "GITHUB_TOKEN=" + ghToken + "\n", "keys.py": "token = \"" + gittest.FakePAT("Tw0") + "\"\n"}
	return gittest.OneOfEach(5000, files)
}

// The same repository fetched over smart HTTP (the mirror's real fetch:
// go-git's transport, the pack writer, gitread's indexer): the indexer
// leaves the objects it cannot resolve within the limits out of the
// pack's index, and records them beside it (the pack as received, its
// checksum intact); the scan records them as holes with the limit's
// reason, not as missing, and reads the rest. (Before: the indexer failed
// on the first bomb, the sync was Permanent 'over a limit: object size',
// the shard parked and neither secret was reported.)
func TestFetchedRefusedObjectHidesNothing(t *testing.T) {
	s := shards(t, time.Minute, 100)
	var err error
	if s.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	crafted := oneOfEach()
	srv := &gittest.PackServer{Pack: crafted.Bytes(), Commit: crafted.Commit}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	spec := shard.Spec{Key: "hostile:fetched-one-of-each", Target: target.Target{Location: ts.URL + "/evil/one-of-each"}}
	shardID, err := s.EnsureShard(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	refusedReadAround(t, s, spec, shardID)
	if n := srv.Requests.Load(); n > 6 {
		t.Errorf("%d requests to the server: the pack was fetched more than twice", n)
	}
}

// refusedReadAround scans the repository of oneOfEach twice and checks
// that the refused objects hid nothing.
func refusedReadAround(t *testing.T, s *activities.Shards, spec shard.Spec, shardID int64) {
	t.Helper()
	l := lease(t, s, shardID, "o")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rc, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("scan: %v; want the refused objects read around", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 128<<20 {
		t.Errorf("allocated %d MiB", n>>20)
	}
	st, err := s.CheckpointShard(context.Background(), workflows.CheckpointInput{Lease: l, ReceiptID: rc.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Complete || !rc.Covered || rc.Refused != 4 || rc.Lost != 4 || rc.Holes != 0 || st != shard.Done {
		t.Fatalf("%s %+v; want Done, covered, Partial, 4 objects refused and lost", st, rc)
	}
	got := map[string]bool{}
	for k := range findingSet(t, shardID) {
		got[k.path] = true
	}
	if len(got) != 2 || !got["ci.env"] || !got["keys.py"] {
		t.Errorf("findings at %v, want ci.env and keys.py", got)
	}
	scope, err := env.Store.Scope(context.Background(), shardID, s.Scanner.Policy())
	if err != nil {
		t.Fatal(err)
	}
	hs, err := env.Store.Holes(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}
	holes := map[string]string{}
	for _, h := range hs {
		if !h.Lost {
			t.Errorf("hole %+v not lost: the same data trips the same bound", h)
		}
		// The refused tree is the one below MaxTreeDepth levels: its path
		// is written short (deep/ and the number of d/ levels).
		path := h.Path
		if rest, ok := strings.CutPrefix(path, "deep/"); ok && strings.Trim(rest, "d/") == "" {
			path = fmt.Sprintf("deep/%d×d/", strings.Count(rest, "d/"))
		}
		holes[path] = h.Reason
	}
	want := map[string]string{
		"bomb.bin": "over a limit: object size", "declared.bin": "over a limit: object size",
		"cycle.bin": "over a limit: delta chain", fmt.Sprintf("deep/%d×d/", gitread.MaxTreeDepth): "over a limit: tree depth",
	}
	if !maps.Equal(holes, want) {
		t.Errorf("holes (path → reason) %v, want %v", holes, want)
	}

	// The next run reads the same repository again: the refused objects
	// are not tried again, and nothing new is found or refused.
	l = lease(t, s, shardID, "o2")
	if rc, err = s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec}); err != nil || rc.Refused != 0 || rc.Lost != 4 {
		t.Fatalf("second scan: %v %+v; want the 4 refused objects still lost, none refused again", err, rc)
	}
}
