package activities_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
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

// A scan of a delta bomb, local or fetched, stops at once: Permanent with
// the limit it went over (the workflow parks the shard on it), within
// bounded memory (the nested bomb asks for 65 GiB). A delta cycle is
// walked (the walk reads the size at its top alone) and refused when its
// blob is read: the scan does not read around it as a hole.
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
		{gittest.DeltaCycle(), true, errclass.ReasonCorrupt}, // the indexer cannot resolve it
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
