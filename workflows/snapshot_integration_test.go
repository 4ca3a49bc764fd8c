package workflows_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/ocistore"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// A runner in the test process: its own store and peer server, a worker on
// its own task queue with the runner activities, registered in the runners
// table. Tests run one after another, and each removes its runners when it
// ends, so a propagation sees exactly the test's runners.
type testRunner struct {
	id     string
	images *ocistore.Store
	load   *activities.Load
}

type runnerOpts struct {
	quota    int64
	registry string // where builds push
	capacity int    // pulls and builds at once (default 6)
	// beforeList runs in the runner's ListSnapshotImagesPage before it
	// lists the store: a race made to happen.
	beforeList func(context.Context)
}

func startRunner(t testing.TB, id string, o runnerOpts) *testRunner {
	t.Helper()
	images, err := ocistore.Open(filepath.Join(t.TempDir(), "oci"), o.quota)
	if err != nil {
		t.Fatal(err)
	}
	// Peer ports as in production: only runners with the token read them.
	peer := httptest.NewServer(images.PeerServer(ocistore.PeerAccess{Token: peerToken}))
	r := &testRunner{id: id, images: images, load: &activities.Load{}}
	ctx := context.Background()
	if o.capacity == 0 {
		o.capacity = 6
	}
	if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: peer.Listener.Addr().String(), Capacity: o.capacity, QuotaBytes: o.quota}); err != nil {
		t.Fatal(err)
	}
	w := worker.New(env.Client, snapshot.TaskQueue(id), worker.Options{MaxConcurrentActivityExecutionSize: o.capacity, DisableWorkflowWorker: true})
	admin := worker.New(env.Client, snapshot.AdminTaskQueue(id), worker.Options{MaxConcurrentActivityExecutionSize: 2, DisableWorkflowWorker: true})
	// The tests' registries listen on loopback, each on a port of its own.
	sources, err := snapshot.ParseSources(o.registry, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	runner := &activities.Runner{ID: id, Store: env.Store, Images: images, Hosts: hosts, WorkDir: t.TempDir(), Creds: creds,
		Registry: o.registry, Sources: sources, PeerToken: peerToken, Load: r.load, ProgressEvery: 50 * time.Millisecond}
	activities.RegisterRunner(w, admin, runner)
	if o.beforeList != nil {
		admin.RegisterActivityWithOptions(func(ctx context.Context, in workflows.PageInput) ([]snapshot.Held, error) {
			o.beforeList(ctx)
			return runner.ListSnapshotImagesPage(ctx, in)
		}, activity.RegisterOptions{Name: "ListSnapshotImagesPage", DisableAlreadyRegisteredCheck: true})
	}
	for _, w := range []worker.Worker{w, admin} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		w.Stop()
		admin.Stop()
		peer.Close()
		if _, err := env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, id); err != nil {
			t.Error(err)
		}
	})
	return r
}

// peerToken is the test fleet's peer token: it must appear in no history.
const peerToken = "peer-token-sentinel-5d2f9a71"

func startRegistry(t testing.TB, o ociregistry.Options) *ociregistry.Registry {
	t.Helper()
	reg, err := ociregistry.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// pushRandom pushes a deterministic image and returns its reference,
// digest and size (manifest, config and layers).
func pushRandom(t testing.TB, reg *ociregistry.Registry, repo string, seed int64, layers int, size int64) (string, string, int64) {
	t.Helper()
	img, err := ociregistry.RandomImage(seed, layers, size)
	if err != nil {
		t.Fatal(err)
	}
	return push(t, reg, repo, img)
}

func push(t testing.TB, reg *ociregistry.Registry, repo string, img v1.Image) (string, string, int64) {
	t.Helper()
	ref := reg.Ref(repo, "v1")
	digest, err := reg.Push(ref, img)
	if err != nil {
		t.Fatal(err)
	}
	return ref, digest, imageBytes(t, img)
}

func imageBytes(t testing.TB, img v1.Image) int64 {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := img.RawManifest()
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

var snapSeq struct {
	sync.Mutex
	n int
}

func snapName(prefix string) string {
	snapSeq.Lock()
	defer snapSeq.Unlock()
	snapSeq.n++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().Unix()%100000, snapSeq.n)
}

// forget deletes a test's snapshot when it ends, so that no later test's
// runner is sent it (the reconcile puts active snapshots on new runners).
func forget(t testing.TB, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.TerminateWorkflow(ctx, workflows.PropagateSnapshotWorkflowID(name), "", "test over")
		if err := env.Store.DeleteSnapshot(ctx, name); err != nil {
			t.Error(err)
		}
	})
}

// fast is the timing of tests that expect pulls to work: a runner that
// does not pick a pull up within seconds is a failure here, not an
// offline host.
var fast = workflows.PullTiming{Queue: 30 * time.Second, Heartbeat: 10 * time.Second}

// propagate creates a snapshot and runs its propagation to the end.
func propagate(t testing.TB, snap snapshot.Snapshot, timing workflows.PullTiming) (workflows.PropagateSnapshotResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, _, err := env.Store.CreateSnapshot(ctx, snap, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	forget(t, snap.Name)
	run, err := workflows.StartPropagation(ctx, env.Client, workflows.PropagateSnapshotInput{Name: snap.Name, Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.PropagateSnapshotResult
	err = run.Get(ctx, &res)
	return res, err
}

func rowsOf(t *testing.T, name string) map[string]snapshot.Row {
	t.Helper()
	rows, err := env.Store.SnapshotRunners(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]snapshot.Row{}
	for _, r := range rows {
		if _, dup := out[r.RunnerID]; dup {
			t.Errorf("two rows of %s on runner %s", name, r.RunnerID)
		}
		out[r.RunnerID] = r
	}
	return out
}

func requireReady(t *testing.T, name, digest string, runners ...*testRunner) {
	t.Helper()
	rows := rowsOf(t, name)
	if len(rows) != len(runners) {
		t.Errorf("%s has %d rows, want %d: %+v", name, len(rows), len(runners), rows)
	}
	for _, r := range runners {
		if row := rows[r.id]; row.State != snapshot.RowReady {
			t.Errorf("%s on %s is %q (%s), want ready", name, r.id, row.State, row.ErrorReason)
		}
		img, ok, err := r.images.Image(name)
		if err != nil || !ok || (digest != "" && img.Digest != digest) {
			t.Errorf("%s's store holds %s as %+v (ok=%v, err=%v), want digest %s", r.id, name, img, ok, err, digest)
		}
		verifyBlobs(t, r)
	}
}

// verifyBlobs checks that every blob a store holds has the digest it is
// stored under: nothing wrong or truncated was ever committed.
func verifyBlobs(t *testing.T, r *testRunner) {
	t.Helper()
	dir := filepath.Join(r.images.Dir(), "blobs", "sha256")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != e.Name() {
			t.Errorf("%s's store holds blob %s whose content hashes to %s", r.id, e.Name(), got)
		}
	}
}

func TestPropagateToThreeRunnersOnceEvenWhenAskedTwice(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, size := pushRandom(t, reg, "snap/three", 1, 3, 1<<20)
	runners := []*testRunner{startRunner(t, "three-a", runnerOpts{}), startRunner(t, "three-b", runnerOpts{}), startRunner(t, "three-c", runnerOpts{})}
	name := snapName("three")
	snap := snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}
	forget(t, name)

	// Two users ask at once: one snapshot, one propagation, one row per runner.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	runs := make([]client.WorkflowRun, 2)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := env.Store.CreateSnapshot(ctx, snap, time.Now().UTC()); err != nil {
				t.Error(err)
				return
			}
			run, err := workflows.StartPropagation(ctx, env.Client, workflows.PropagateSnapshotInput{Name: name, Timing: fast})
			if err != nil {
				t.Error(err)
				return
			}
			runs[i] = run
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if runs[0].GetRunID() != runs[1].GetRunID() {
		t.Errorf("two requests started two propagations: %s and %s", runs[0].GetRunID(), runs[1].GetRunID())
	}
	var res workflows.PropagateSnapshotResult
	if err := runs[0].Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	requireReady(t, name, digest, runners...)
	recordHistory(t, "propagate-snapshot-pipelined", runs[0].GetID(), runs[0].GetRunID())
	// Runners present the peer token from their own setting: no workflow
	// carries it.
	it := env.Client.GetWorkflowHistory(ctx, runs[0].GetID(), runs[0].GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(e.String(), peerToken) {
			t.Errorf("event %d (%s) holds the peer token", e.GetEventId(), e.GetEventType())
		}
	}
	got, err := env.Store.Snapshot(ctx, name)
	if err != nil || got.State != snapshot.Active || got.Digest != digest {
		t.Errorf("snapshot = %+v, %v; want active with digest %s", got, err, digest)
	}
	// The registry sent one copy; the other runners pulled from peers.
	if egress := reg.BlobBytes(); egress > size*105/100 {
		t.Errorf("registry sent %d blob bytes for a %d-byte image to 3 runners", egress, size)
	}
	sources := map[string]int{}
	for _, row := range rowsOf(t, name) {
		kind, _, _ := strings.Cut(row.Source, ":")
		sources[kind]++
	}
	if sources["registry"] != 1 || sources["peer"] != 2 {
		t.Errorf("sources = %v, want 1 registry and 2 peer", sources)
	}
	where, err := env.Store.ReadyRunners(ctx, name)
	if err != nil || len(where) != 3 {
		t.Errorf("ReadyRunners = %v, %v; want the 3 runners", where, err)
	}
}

func TestCorruptAndTruncatedBlobsAreRejectedRetriedNeverStored(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	img, err := ociregistry.RandomImage(2, 2, 512<<10)
	if err != nil {
		t.Fatal(err)
	}
	ref, digest, _ := push(t, reg, "snap/faulty", img)
	layers, _ := img.Layers()
	d0, _ := layers[0].Digest()
	d1, _ := layers[1].Digest()
	reg.Corrupt(d0.String(), 1)
	reg.Truncate(d1.String(), 1)
	r := startRunner(t, "faulty", runnerOpts{})
	name := snapName("faulty")
	if _, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, fast); err != nil {
		t.Fatal(err)
	}
	requireReady(t, name, digest, r)
	for _, d := range []v1.Hash{d0, d1} {
		if n := reg.BlobGetsOf(d.String()); n != 2 {
			t.Errorf("blob %s was fetched %d times, want 2 (the bad one, then the good one)", d, n)
		}
	}
}

// "fetched X from the registry" counts what every attempt made the registry
// send: a layer cut off halfway and fetched again counts one and a half
// times. Before, only the attempt that succeeded counted.
func TestPullCountsEveryAttemptsBytes(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	img, err := ociregistry.RandomImage(4, 2, 512<<10)
	if err != nil {
		t.Fatal(err)
	}
	ref, digest, _ := push(t, reg, "snap/count", img)
	layers, _ := img.Layers()
	d1, _ := layers[1].Digest()
	reg.Truncate(d1.String(), 1)
	r := startRunner(t, "count", runnerOpts{})
	name := snapName("count")
	res, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, fast)
	if err != nil {
		t.Fatal(err)
	}
	requireReady(t, name, digest, r)
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	if n := reg.BlobGetsOf(d1.String()); n != 2 {
		t.Fatalf("layer %s was fetched %d times, want 2 (cut off, then whole)", d1, n)
	}
	recordHistory(t, "propagate-snapshot-pull-bytes", workflows.PropagateSnapshotWorkflowID(name), "")
	// Each attempt resolves the tag: the manifest is sent by each.
	if sent := reg.BlobBytes() + int64(reg.ManifestGets()*len(raw)); res.FromRegistry != sent {
		t.Errorf("propagation counted %d bytes from the registry, which sent %d (blobs and %d manifests)", res.FromRegistry, sent, reg.ManifestGets())
	}
}

// A pull's heartbeat timeout is a few of its heartbeats, not half a
// minute: a runner killed mid-pull has the pull retried within seconds
// (the kill itself: faulttest's TestSnapshotPullResumesAfterRunnerKill). A
// build keeps its own, longer one (its fetch and push may be silent
// longer). Before, a pull's was 30s.
func TestPullHeartbeatTimeoutIsAFewHeartbeats(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, _ := pushRandom(t, reg, "snap/beat", 6, 1, 64<<10)
	r := startRunner(t, "beat", runnerOpts{})
	name := snapName("beat")
	if _, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, workflows.PullTiming{Queue: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	requireReady(t, name, digest, r)
	it := env.Client.GetWorkflowHistory(context.Background(), workflows.PropagateSnapshotWorkflowID(name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	pulls := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "PullSnapshot" {
			pulls++
			if hb := a.GetHeartbeatTimeout().AsDuration(); hb != workflows.DefaultPullHeartbeat || hb > 10*time.Second {
				t.Errorf("a pull's heartbeat timeout is %v, want %v", hb, workflows.DefaultPullHeartbeat)
			}
		}
	}
	if pulls != 1 {
		t.Errorf("%d pulls scheduled, want 1", pulls)
	}
}

func TestRemovalKeepsALayerAnotherSnapshotUses(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	shared, err := ociregistry.RandomLayer(3, 0, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	only, _ := ociregistry.RandomLayer(3, 1, 256<<10)
	other, _ := ociregistry.RandomLayer(3, 2, 256<<10)
	imgA, _ := ociregistry.ImageOf(shared, only)
	imgB, _ := ociregistry.ImageOf(shared, other)
	refA, digestA, _ := push(t, reg, "snap/a", imgA)
	refB, digestB, _ := push(t, reg, "snap/b", imgB)
	runners := []*testRunner{startRunner(t, "rm-a", runnerOpts{}), startRunner(t, "rm-b", runnerOpts{})}
	a, b := snapName("rm-a"), snapName("rm-b")
	for _, s := range []snapshot.Snapshot{{Name: a, Kind: snapshot.KindImage, ImageRef: refA}, {Name: b, Kind: snapshot.KindImage, ImageRef: refB}} {
		if _, err := propagate(t, s, fast); err != nil {
			t.Fatal(err)
		}
	}
	requireReady(t, a, digestA, runners...)
	requireReady(t, b, digestB, runners...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.RemoveSnapshotResult
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.RemoveSnapshotWorkflowID(a), TaskQueue: workflows.TaskQueue},
		workflows.RemoveSnapshot, workflows.RemoveSnapshotInput{Name: a})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "remove-snapshot", run.GetID(), run.GetRunID())
	if !res.Deleted || res.Removed != 2 {
		t.Errorf("removal = %+v, want deleted from 2 runners", res)
	}
	if _, err := env.Store.Snapshot(ctx, a); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("snapshot %s: %v, want it gone", a, err)
	}
	if rows := rowsOf(t, a); len(rows) != 0 {
		t.Errorf("rows left after removal: %+v", rows)
	}
	sharedDigest, _ := shared.Digest()
	onlyDigest, _ := only.Digest()
	for _, r := range runners {
		if _, ok, _ := r.images.Image(a); ok {
			t.Errorf("%s still holds %s", r.id, a)
		}
		if !hasBlob(r, sharedDigest) {
			t.Errorf("%s lost the layer %s that %s still uses", r.id, sharedDigest, b)
		}
		if hasBlob(r, onlyDigest) {
			t.Errorf("%s kept the layer %s only %s used", r.id, onlyDigest, a)
		}
	}
	requireReady(t, b, digestB, runners...)
}

func hasBlob(r *testRunner, d v1.Hash) bool {
	_, err := os.Stat(filepath.Join(r.images.Dir(), "blobs", d.Algorithm, d.Hex))
	return err == nil
}

func reconcile(t *testing.T, in workflows.ReconcileRunnersInput) workflows.ReconcileRunnersResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "test-reconcile-" + snapName("r"), TaskQueue: workflows.TaskQueue},
		workflows.ReconcileRunners, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.ReconcileRunnersResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "reconcile-runners-"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), run.GetID(), run.GetRunID())
	return res
}

// waitPropagation waits for the propagation the reconcile started.
func waitPropagation(t *testing.T, name string) workflows.PropagateSnapshotResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.PropagateSnapshotResult
	if err := env.Client.GetWorkflow(ctx, workflows.PropagateSnapshotWorkflowID(name), "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestReconcileRepairsAnImageDeletedBehindTheRunnersBack(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, _ := pushRandom(t, reg, "snap/repair", 4, 2, 256<<10)
	orphanRef, _, _ := pushRandom(t, reg, "snap/orphan", 5, 1, 64<<10)
	r1, r2 := startRunner(t, "repair-a", runnerOpts{}), startRunner(t, "repair-b", runnerOpts{})
	name := snapName("repair")
	if _, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, fast); err != nil {
		t.Fatal(err)
	}
	requireReady(t, name, digest, r1, r2)
	// Behind the runners' backs: r1 loses the image, r2 gains one no row
	// accounts for.
	if err := r1.images.Remove(name); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.images.Pull(context.Background(), "orphan", orphanRef, []ocistore.Source{{Name: "registry", Registry: reg.Addr(), Insecure: true}}, ocistore.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	res := reconcile(t, workflows.ReconcileRunnersInput{Queue: 30 * time.Second})
	if res.Repulled != 1 || res.Removed != 1 || res.Checked < 2 {
		t.Errorf("reconcile = %+v, want 1 re-pulled and 1 removed on 2 checked runners", res)
	}
	waitPropagation(t, name)
	requireReady(t, name, digest, r1, r2)
	if _, ok, _ := r2.images.Image("orphan"); ok {
		t.Error("the orphan image is still on repair-b")
	}
	if row := rowsOf(t, name)[r1.id]; !strings.HasPrefix(row.Source, "peer:") {
		t.Errorf("the repair pulled from %q, want the peer that holds it", row.Source)
	}
}

func TestPullWindowEndsInTimeoutThenReconcileRetries(t *testing.T) {
	// 1 MB at 128 kB/s takes 8 s; the window is 2 s. The registry sends
	// in bursts a quarter of a second apart, well within the pull's stall
	// bound (half the heartbeat timeout, 1 s): the window ends the pull,
	// not a stall.
	reg := startRegistry(t, ociregistry.Options{BytesPerSecond: 128 << 10})
	ref, digest, _ := pushRandom(t, reg, "snap/slow", 6, 1, 1<<20)
	r := startRunner(t, "slow", runnerOpts{})
	name := snapName("slow")
	res, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref},
		workflows.PullTiming{Window: 2 * time.Second, Attempt: time.Second, Heartbeat: 2 * time.Second, Queue: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "propagate-snapshot-timeout", workflows.PropagateSnapshotWorkflowID(name), "")
	if res.Reason != snapshot.ReasonTimeout {
		t.Errorf("result reason = %q, want %q", res.Reason, snapshot.ReasonTimeout)
	}
	row := rowsOf(t, name)[r.id]
	if row.State != snapshot.RowError || row.ErrorReason != snapshot.ReasonTimeout {
		t.Fatalf("row = %+v, want error %q", row, snapshot.ReasonTimeout)
	}
	snap, _ := env.Store.Snapshot(context.Background(), name)
	if snap.State != snapshot.Error {
		t.Errorf("snapshot state %s, want error", snap.State)
	}
	// The reason is transient: once the registry is fast again the
	// reconcile retries the row and the pull completes, keeping the bytes
	// the timed-out attempts stored.
	reg.SetRate(0)
	rec := reconcile(t, workflows.ReconcileRunnersInput{RetryBase: time.Millisecond, Queue: 30 * time.Second})
	if rec.Retried != 1 {
		t.Errorf("reconcile retried %d rows, want 1", rec.Retried)
	}
	waitPropagation(t, name)
	requireReady(t, name, digest, r)
	if after := rowsOf(t, name)[r.id]; after.Retries != 0 {
		t.Errorf("a ready row keeps %d retries", after.Retries)
	}
}

func TestBadImagesLeaveNothingBehind(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	bigRef, _, _ := pushRandom(t, reg, "snap/big", 7, 2, 512<<10)
	startRunner(t, "quota", runnerOpts{quota: 256 << 10})
	for _, tc := range []struct {
		name, ref, want string
	}{
		{"missing", reg.Ref("snap/none", "v1"), "not found"},
		{"quota", bigRef, "quota"},
		// Runners pull only from their sources (here 127.0.0.1), before
		// any request.
		{"not-allowed", "localhost:1/snap/none:v1", "not an allowed snapshot source"},
		// Three layers of 2^62 bytes: refused on the manifest, before any
		// quota arithmetic.
		{"overflow", hostileManifest(t, reg, "snap/hostile", 1<<62, 1<<62, 1<<62), "the largest image this runner takes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := snapName(tc.name)
			_, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: tc.ref}, fast)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) || !strings.Contains(app.Message(), tc.want) {
				t.Fatalf("propagation = %v, want Permanent mentioning %q", err, tc.want)
			}
			if _, err := env.Store.Snapshot(context.Background(), name); err == nil {
				t.Error("the snapshot is still there")
			}
			var n int
			if err := env.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM snapshot_runners WHERE snapshot_ref = $1`, name).Scan(&n); err != nil || n != 0 {
				t.Errorf("%d rows left (%v)", n, err)
			}
		})
	}
}

// One runner refuses the image for good (over its quota) while another
// fails for a reason that may pass (registered with a fresh heartbeat but
// polling nothing: "runner offline"): the snapshot is kept in error for the
// reconcile's retries, not abandoned.
func TestMixedFailuresKeepTheSnapshotForRetries(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, _, _ := pushRandom(t, reg, "snap/mixed", 8, 2, 512<<10)
	small := startRunner(t, "mixed-small", runnerOpts{quota: 256 << 10})
	const silent = "mixed-silent"
	ctx := context.Background()
	if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: silent, PeerAddr: "127.0.0.1:1", Capacity: 6}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, silent) })

	name := snapName("mixed")
	res, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref},
		workflows.PullTiming{Queue: 2 * time.Second, Heartbeat: 10 * time.Second})
	if err != nil {
		t.Fatalf("propagation failed (%v): a runner that may come back was given up with the snapshot", err)
	}
	recordHistory(t, "propagate-snapshot-mixed-failures", workflows.PropagateSnapshotWorkflowID(name), "")
	if res.Ready != 0 || res.Failed != 2 {
		t.Errorf("result = %+v, want 2 failed", res)
	}
	snap, err := env.Store.Snapshot(ctx, name)
	if err != nil || snap.State != snapshot.Error {
		t.Fatalf("snapshot = %+v, %v; want kept in error", snap, err)
	}
	rows := rowsOf(t, name)
	if r := rows[small.id]; r.State != snapshot.RowError || !strings.Contains(r.ErrorReason, "quota") {
		t.Errorf("row on %s = %+v, want error over the quota", small.id, r)
	}
	if r := rows[silent]; r.State != snapshot.RowError || r.ErrorReason != snapshot.ReasonOffline {
		t.Errorf("row on %s = %+v, want error %q", silent, r, snapshot.ReasonOffline)
	}
}

// A row left waiting for a pull with no propagation running (its runner
// was draining when the propagation looked) is taken by the next
// reconcile.
func TestReconcileWakesARowLeftWaiting(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, _ := pushRandom(t, reg, "snap/waiting", 9, 1, 64<<10)
	r := startRunner(t, "waiting", runnerOpts{})
	ctx := context.Background()
	name := snapName("waiting")
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	forget(t, name)
	if _, _, err := env.Store.InsertSnapshotRunner(ctx, r.id, name, snapshot.RowPulling, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	rec := reconcile(t, workflows.ReconcileRunnersInput{Queue: 30 * time.Second})
	if !slices.Contains(rec.Propagated, name) {
		t.Fatalf("reconcile = %+v, want %s propagated", rec, name)
	}
	waitPropagation(t, name)
	requireReady(t, name, digest, r)
}

// hostileManifest stores a manifest whose layers declare the given sizes,
// whatever the small blobs behind them hold, and returns its reference.
func hostileManifest(t *testing.T, reg *ociregistry.Registry, repo string, sizes ...int64) string {
	t.Helper()
	cfg := []byte(`{"architecture":"amd64","os":"linux"}`)
	cd, err := reg.PushBlob(repo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(cfg)), Digest: v1.Hash{Algorithm: "sha256", Hex: cd[len("sha256:"):]}}}
	for i, size := range sizes {
		d, err := reg.PushBlob(repo, fmt.Appendf(nil, "layer %d", i))
		if err != nil {
			t.Fatal(err)
		}
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCIUncompressedLayer, Size: size, Digest: v1.Hash{Algorithm: "sha256", Hex: d[len("sha256:"):]}})
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref(repo, "v1")
	if _, err := reg.PushRaw(ref, raw); err != nil {
		t.Fatal(err)
	}
	return ref
}

// A runner that stopped (registered, heartbeat fresh when the pull was
// placed, nobody polling its queue) has its pull end "runner offline" at
// the queue bound: by then its heartbeat is older than the freshness
// bound, so its admin queue is not asked for a second bound
// ("silent-runner-offline"; the clock-driven proof is unittest's
// TestAPullOnASilentRunnerEndsOfflineAtTheQueueBound).
func TestAPullOnAStoppedRunnerEndsOfflineAtTheQueueBound(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, _, _ := pushRandom(t, reg, "snap/stopped", 8, 1, 16<<10)
	const id = "stopped"
	ctx := context.Background()
	if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "127.0.0.1:1", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, id) })
	// Eligible when placed (heard within 5 s), silent at the 6 s bound.
	name := snapName("stopped")
	res, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref},
		workflows.PullTiming{Queue: 6 * time.Second, Fresh: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "propagate-snapshot-silent-runner", workflows.PropagateSnapshotWorkflowID(name), "")
	row := rowsOf(t, name)[id]
	if res.Reason != snapshot.ReasonOffline || row.State != snapshot.RowError || row.ErrorReason != snapshot.ReasonOffline {
		t.Fatalf("propagation %+v, row %+v: want error %q", res, row, snapshot.ReasonOffline)
	}
	it := env.Client.GetWorkflowHistory(ctx, workflows.PropagateSnapshotWorkflowID(name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "ListSnapshotImagesPage" {
			t.Errorf("the stopped runner's admin queue was asked (%s): a second queue bound", a.GetTaskQueue().GetName())
		}
	}
}

// A pull that ends before the runner's own progress write lands (a fast
// pull, a slow database; here the row is locked until the pull is over)
// still leaves its row with where the image came from and its bytes: the
// propagation writes them from the pull's result with the move to ready.
// Before, the row kept what the runner managed to write — nothing, and
// 'snapshot show' printed "-" for both.
func TestAFastPullRecordsItsSourceAndBytes(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, size := pushRandom(t, reg, "snap/fast", 9, 1, 32<<10)
	r := startRunner(t, "fast", runnerOpts{})
	name := snapName("fast")
	ctx := context.Background()
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	forget(t, name)
	// The row, as the propagation adds it, locked by a transaction that
	// outlives the pull: none of the runner's writes lands.
	if _, _, err := env.Store.InsertSnapshotRunner(ctx, r.id, name, snapshot.RowPulling, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	tx, err := env.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM snapshot_runners WHERE runner_id = $1 AND snapshot_ref = $2 FOR UPDATE`, r.id, name); err != nil {
		t.Fatal(err)
	}
	run, err := workflows.StartPropagation(ctx, env.Client, workflows.PropagateSnapshotInput{Name: name, Timing: fast})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the pull over", 2*time.Minute, func() (bool, string) {
		it := env.Client.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return false, err.Error()
			}
			if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && pulled(t, run, a.GetScheduledEventId()) {
				return true, ""
			}
		}
		return false, "no PullSnapshot completed"
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var res workflows.PropagateSnapshotResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	requireReady(t, name, digest, r)
	if row := rowsOf(t, name)[r.id]; row.Source != snapshot.Registry || row.BytesTotal != size || row.BytesDone != size {
		t.Errorf("row %+v: want its %d bytes from %s recorded", row, size, snapshot.Registry)
	}
}

// pulled reports whether the event scheduled is a PullSnapshot.
func pulled(t *testing.T, run client.WorkflowRun, scheduled int64) bool {
	t.Helper()
	it := env.Client.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetEventId() == scheduled {
			a := e.GetActivityTaskScheduledEventAttributes()
			return a != nil && a.GetActivityType().GetName() == "PullSnapshot"
		}
	}
	return false
}
