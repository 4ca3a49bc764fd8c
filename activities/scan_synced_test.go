package activities_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// A scan says whether it had to sync its mirror itself (its job synced on
// another worker, or synced nothing): what the fleet benchmark counts,
// and what an operator greps for when mirrors are cloned twice.
func TestScanSaysWhetherItSyncedTheMirror(t *testing.T) {
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	if _, err := fg.CreateRepo("acme", "synced"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit("acme", "synced", "main", map[string]string{"a.txt": "a\n"}, "a"); err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "synced")
	owner, err := mirror.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := shards(t, time.Minute, 100)
	s.Mirrors = owner
	spec := shard.Spec{Key: "synced:" + url, Target: target.Target{Location: url}}
	id, err := s.EnsureShard(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := s.SyncShardMirror(context.Background(), workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		mirrors *mirror.Mirrors
		refs    string
		synced  bool
	}{
		{"on the worker that synced", owner, digest, false},
		{"on another worker", nil, digest, true},
		{"a job that synced nothing", owner, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			s := shards(t, time.Minute, 100)
			s.Log = zap.New(core)
			if s.Mirrors = tc.mirrors; s.Mirrors == nil {
				if s.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec, RefsDigest: tc.refs}); err != nil {
				t.Fatal(err)
			}
			starting := logs.FilterMessage("scan starting").All()
			if len(starting) != 1 {
				t.Fatalf("%d 'scan starting' lines, want 1", len(starting))
			}
			if got, ok := starting[0].ContextMap()["mirrorSynced"].(bool); !ok || got != tc.synced {
				t.Fatalf("mirrorSynced = %v (%t), want %t", starting[0].ContextMap()["mirrorSynced"], ok, tc.synced)
			}
		})
	}
}
