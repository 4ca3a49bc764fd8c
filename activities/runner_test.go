package activities_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"gitfleet/activities"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/ocistore"
	"gitfleet/workflows"
)

var runnerSeq atomic.Int64

// pullFixture is a runner's store, a registry holding one image and the
// runner's row of a snapshot of it, waiting for the pull.
type pullFixture struct {
	runner *activities.Runner
	reg    *ociregistry.Registry
	snap   string
	ref    string // by digest
	digest string
}

func newPullFixture(t *testing.T, o ociregistry.Options, size int64) *pullFixture {
	t.Helper()
	ctx := context.Background()
	reg, err := ociregistry.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	img, err := ociregistry.RandomImage(60+runnerSeq.Load(), 2, size)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := reg.Push(reg.Ref("snap/pull", "v1"), img)
	if err != nil {
		t.Fatal(err)
	}
	images, err := ocistore.Open(filepath.Join(t.TempDir(), "oci"), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := runnerSeq.Add(1)
	id, name := fmt.Sprintf("act-pull-%d", n), fmt.Sprintf("act-pull-%d", n)
	if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "127.0.0.1:1", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: reg.Ref("snap/pull", "v1")},
		time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Store.InsertSnapshotRunner(ctx, id, name, snapshot.RowPulling, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, id)
		_, _ = env.Store.Pool().Exec(ctx, `DELETE FROM snapshots WHERE name = $1`, name)
	})
	sources, err := snapshot.ParseSources(reg.Addr()+"/gitfleet", "")
	if err != nil {
		t.Fatal(err)
	}
	return &pullFixture{
		runner: &activities.Runner{ID: id, Store: env.Store, Images: images, ProgressEvery: 10 * time.Millisecond, Sources: sources},
		reg:    reg, snap: name, ref: reg.Ref("snap/pull", digest), digest: digest,
	}
}

// hungPeer accepts connections and answers nothing until the test ends;
// it counts the requests it got.
func hungPeer(t *testing.T) (addr string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://"), requests
}

// pullWithin runs PullSnapshot and fails the test if it has not ended
// within a minute (the test environment's own timeout does not reach a
// pull that waits).
func pullWithin(t *testing.T, ae *testsuite.TestActivityEnvironment, r *activities.Runner, in workflows.PullInput) (workflows.PullResult, error) {
	t.Helper()
	type result struct {
		res workflows.PullResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		var out result
		v, err := ae.ExecuteActivity(r.PullSnapshot, in)
		if out.err = err; err == nil {
			out.err = v.Get(&out.res)
		}
		done <- out
	}()
	select {
	case out := <-done:
		return out.res, out.err
	case <-time.After(time.Minute):
		t.Fatal("the pull has not ended after a minute")
		return workflows.PullResult{}, nil
	}
}

// A peer that stalled in an earlier attempt (its heartbeat details name
// it) is not asked again: the retry goes to the registry, and its own
// heartbeats keep naming the peer for the attempt after it. Before, every
// retry went back to the same hung peer.
func TestPullSnapshotRetryLeavesOutThePeerAnEarlierAttemptGaveUp(t *testing.T) {
	f := newPullFixture(t, ociregistry.Options{}, 64<<10)
	addr, asked := hungPeer(t)
	var s testsuite.WorkflowTestSuite
	ae := s.NewTestActivityEnvironment()
	ae.RegisterActivity(f.runner)
	ae.SetHeartbeatDetails(ocistore.Progress{Skipped: []string{snapshot.PeerSource("hung")}})
	var mu sync.Mutex
	var beats []ocistore.Progress
	ae.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p ocistore.Progress
		if details.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})
	res, err := pullWithin(t, ae, f.runner, workflows.PullInput{Snapshot: f.snap, Ref: f.ref,
		Peers: []workflows.Peer{{RunnerID: "hung", Addr: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != f.digest || res.BySource[snapshot.Registry] != res.Size {
		t.Errorf("pull = %+v, want all of %s from the registry", res, f.digest)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the peer an earlier attempt gave up was asked %d times", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(beats) == 0 || !slices.Contains(beats[len(beats)-1].Skipped, snapshot.PeerSource("hung")) {
		t.Errorf("heartbeats %+v, want the skipped peer kept for the next attempt", beats)
	}
}

// Progress is written to the row off the download's path: with the row
// locked by another transaction (a database that does not answer), the
// pull still streams to its end. Before, a synchronous UPDATE every
// 500 ms sat in the stream and held it until the lock went away.
func TestPullSnapshotDoesNotWaitForTheDatabase(t *testing.T) {
	// 256 KiB at 256 KiB/s: about a second of progress reports.
	f := newPullFixture(t, ociregistry.Options{BytesPerSecond: 256 << 10}, 128<<10)
	ctx := context.Background()
	tx, err := env.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM snapshot_runners WHERE runner_id = $1 AND snapshot_ref = $2 FOR UPDATE`,
		f.runner.ID, f.snap); err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	ae := s.NewTestActivityEnvironment()
	ae.RegisterActivity(f.runner)
	beats := atomic.Int64{}
	ae.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	res, err := pullWithin(t, ae, f.runner, workflows.PullInput{Snapshot: f.snap, Ref: f.ref})
	if err != nil || res.Digest != f.digest {
		t.Fatalf("pull with its row locked = %+v, %v", res, err)
	}
	if beats.Load() == 0 {
		t.Error("no heartbeat while the row was locked")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// Runner liveness is judged on the database's clock, which writes the
// heartbeats and measures the silence: a central worker whose clock runs
// ten minutes ahead neither takes a live runner offline nor leaves it out
// of new pulls, and one running ten minutes behind still takes a runner
// silent for five minutes offline. Before, the worker's clock was compared
// with the heartbeat each runner wrote with its own.
func TestRunnerLivenessUsesTheDatabasesClock(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		skew, silence time.Duration
		offline       bool
	}{
		{"worker ahead, runner alive", 10 * time.Minute, 0, false},
		{"worker behind, runner silent", -10 * time.Minute, 5 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("act-clock-%d", runnerSeq.Add(1))
			if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "127.0.0.1:1", Capacity: 1}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, id) })
			if _, err := env.Store.Pool().Exec(ctx, `UPDATE runners SET last_heartbeat = now() - $2 * interval '1 second' WHERE id = $1`,
				id, tc.silence.Seconds()); err != nil {
				t.Fatal(err)
			}
			snap := id
			if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: snap, Kind: snapshot.KindImage, ImageRef: "127.0.0.1:1/a/b:1"},
				time.Now().UTC()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Store.DeleteSnapshot(ctx, snap) })
			s := &activities.Snapshots{Store: env.Store, Now: func() time.Time { return time.Now().Add(tc.skew) }}
			fleet, err := s.PrepareSnapshotRunners(ctx, workflows.PrepareRunnersInput{Snapshot: snap, Fresh: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, got := fleet.Runners[id]; got == tc.offline {
				t.Errorf("eligible for new pulls = %v, want %v", got, !tc.offline)
			}
			ids, err := s.MarkRunnersOffline(ctx, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(ids, id); got != tc.offline {
				t.Errorf("marked offline = %v, want %v (%v)", got, tc.offline, ids)
			}
		})
	}
}

// A runner pulls only from its sources (GITFLEET_REGISTRY and
// GITFLEET_SNAPSHOT_SOURCES): a snapshot naming another registry is
// refused, Permanent, before the runner sends it anything — its
// credentials included. Before, any registry a requester named was asked.
func TestPullSnapshotRefusesARegistryNotAllowed(t *testing.T) {
	f := newPullFixture(t, ociregistry.Options{}, 16<<10)
	var err error
	if f.runner.Sources, err = snapshot.ParseSources("registry.example:5000/gitfleet", "ghcr.io/acme"); err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	ae := s.NewTestActivityEnvironment()
	ae.RegisterActivity(f.runner)
	_, err = pullWithin(t, ae, f.runner, workflows.PullInput{Snapshot: f.snap, Ref: f.ref})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) || !strings.Contains(err.Error(), "not an allowed snapshot source") ||
		!strings.Contains(err.Error(), "registry.example:5000, ghcr.io/acme") {
		t.Fatalf("pull from a registry not allowed: %v, want Permanent naming the sources", err)
	}
	if n := f.reg.ManifestGets() + f.reg.BlobGets(); n != 0 {
		t.Errorf("the registry got %d requests", n)
	}
}

// Peers whose ports require the token get it from the runner's own
// setting: the pull comes from the peer; the token shows in no log line,
// heartbeat or result. A runner without it gets the image from the
// registry instead.
func TestPullSnapshotPresentsThePeerToken(t *testing.T) {
	const token = "peer-token-sentinel-7e0b2c"
	for _, tc := range []struct {
		name     string
		token    ocistore.Token
		fromPeer bool
	}{
		{"with the token", token, true},
		{"without it", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPullFixture(t, ociregistry.Options{}, 32<<10)
			holder, err := ocistore.Open(filepath.Join(t.TempDir(), "oci"), 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Pull(context.Background(), f.snap, f.ref, []ocistore.Source{{Name: "registry", Registry: f.reg.Addr(), Insecure: true, Anonymous: true}}, ocistore.PullOptions{}); err != nil {
				t.Fatal(err)
			}
			peer := httptest.NewServer(holder.PeerServer(ocistore.PeerAccess{Token: token}))
			t.Cleanup(peer.Close)
			core, logs := observer.New(zap.DebugLevel)
			f.runner.Log, f.runner.PeerToken = zap.New(core), tc.token
			var s testsuite.WorkflowTestSuite
			ae := s.NewTestActivityEnvironment()
			ae.RegisterActivity(f.runner)
			var mu sync.Mutex
			var beats []string
			ae.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
				var p ocistore.Progress
				if details.Get(&p) == nil {
					mu.Lock()
					beats = append(beats, fmt.Sprintf("%+v", p))
					mu.Unlock()
				}
			})
			res, err := pullWithin(t, ae, f.runner, workflows.PullInput{Snapshot: f.snap, Ref: f.ref,
				Peers: []workflows.Peer{{RunnerID: "holder", Addr: strings.TrimPrefix(peer.URL, "http://")}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.BySource[snapshot.PeerSource("holder")] == res.Size; got != tc.fromPeer {
				t.Fatalf("all from the peer: %v (%+v), want %v", got, res.BySource, tc.fromPeer)
			}
			var seen strings.Builder
			for _, e := range logs.All() {
				fmt.Fprintf(&seen, "%s %v\n", e.Message, e.ContextMap())
			}
			mu.Lock()
			fmt.Fprintf(&seen, "%v %+v", beats, res)
			mu.Unlock()
			if strings.Contains(seen.String(), token) {
				t.Fatalf("the token shows in the logs, heartbeats or result:\n%s", seen.String())
			}
		})
	}
}
