package faulttest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/config"
	"gitfleet/workflows"
)

// Snapshot propagation under faults (architecture §7), with real processes: the
// central worker (workflows and table activities on "gitfleet") and runner
// processes (`worker --runner-id …`, each with its own image store and peer
// server), the in-process registry as the images' origin. Tests run one
// after another; each kills its runners and deletes their rows and its
// snapshots when it ends, since a propagation targets every registered
// runner with a fresh heartbeat and a reconcile every active snapshot.

// startCentral starts the central worker with the snapshot timing of the
// propagations the reconcile starts (those a test starts itself get their
// timing in their input). The runner-reconcile schedule is moved out of the
// way: the tests run ReconcileRunners themselves, when they mean to.
func startCentral(t testing.TB, extraEnv ...string) *workerProc {
	t.Helper()
	return startWorker(t, append([]string{
		config.EnvReconcileEvery + "=24h",
		config.EnvPullQueue + "=30s",
		config.EnvRunnerOffline + "=1m",
	}, extraEnv...)...)
}

func startRegistry(t testing.TB, o ociregistry.Options) *ociregistry.Registry {
	t.Helper()
	reg, err := ociregistry.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// testImage is an image pushed to a test registry.
type testImage struct {
	ref, digest string
	size        int64 // manifest, config and layers
	manifest    int64 // bytes of the manifest
	config      int64 // bytes of the config
	layers      []v1.Descriptor
}

// pushImage pushes a deterministic image of n layers of size bytes.
func pushImage(t testing.TB, reg *ociregistry.Registry, repo string, seed int64, n int, size int64) testImage {
	t.Helper()
	img, err := ociregistry.RandomImage(seed, n, size)
	if err != nil {
		t.Fatal(err)
	}
	ti := testImage{ref: reg.Ref(repo, "v1")}
	if ti.digest, err = reg.Push(ti.ref, img); err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	ti.size = int64(len(raw)) + m.Config.Size
	ti.manifest, ti.config = int64(len(raw)), m.Config.Size
	for _, l := range m.Layers {
		ti.size += l.Size
	}
	ti.layers = m.Layers
	return ti
}

var snapSeq struct {
	sync.Mutex
	n int
}

// snapName is a snapshot name no other test (or earlier run on the same
// Temporal server) uses.
func snapName(prefix string) string {
	snapSeq.Lock()
	defer snapSeq.Unlock()
	snapSeq.n++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixMilli()%10_000_000, snapSeq.n)
}

// createSnapshot adds an image snapshot; the cleanup ends its propagation
// if it still runs and deletes it with its rows.
func createSnapshot(t testing.TB, name, ref string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref},
		time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.TerminateWorkflow(ctx, workflows.PropagateSnapshotWorkflowID(name), "", "test over")
		if _, err := env.Store.Pool().Exec(ctx, `DELETE FROM snapshots WHERE name = $1`, name); err != nil {
			t.Errorf("delete snapshot %s: %v", name, err)
		}
	})
}

// propagate creates a snapshot of ref and starts its propagation.
func propagate(t testing.TB, name, ref string, timing workflows.PullTiming) client.WorkflowRun {
	t.Helper()
	createSnapshot(t, name, ref)
	run, err := workflows.StartPropagation(context.Background(), env.Client,
		workflows.PropagateSnapshotInput{Name: name, Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func propagationResult(t testing.TB, run client.WorkflowRun, within time.Duration) workflows.PropagateSnapshotResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var res workflows.PropagateSnapshotResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("propagation %s: %v", run.GetID(), err)
	}
	return res
}

// waitPropagation waits for the latest run of a snapshot's propagation
// (the one a reconcile started or woke).
func waitPropagation(t testing.TB, name string) workflows.PropagateSnapshotResult {
	t.Helper()
	return propagationResult(t, env.Client.GetWorkflow(context.Background(), workflows.PropagateSnapshotWorkflowID(name), ""), 2*time.Minute)
}

func reconcile(t testing.TB, in workflows.ReconcileRunnersInput) workflows.ReconcileRunnersResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "faulttest-reconcile-" + snapName("r"),
		TaskQueue: workflows.TaskQueue}, workflows.ReconcileRunners, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.ReconcileRunnersResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func rowOf(t testing.TB, runnerID, name string) snapshot.Row {
	t.Helper()
	row, err := env.Store.SnapshotRunner(context.Background(), runnerID, name)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// waitRow waits until a row satisfies cond and returns it. PostgreSQL
// tells nobody when a row changes (the runner writes its progress there
// directly), so the row is polled; the deadline bounds the wait, the
// interval only its cost.
func waitRow(t testing.TB, runnerID, name, what string, cond func(snapshot.Row) bool) snapshot.Row {
	t.Helper()
	var row snapshot.Row
	poll.Until(t, fmt.Sprintf("%s on %s: %s", name, runnerID, what), time.Minute, func() (bool, string) {
		var err error
		row, err = env.Store.SnapshotRunner(context.Background(), runnerID, name)
		return err == nil && cond(row), fmt.Sprintf("row %+v (%v)", row, err)
	})
	return row
}

func blobDir(storeDir string) string { return filepath.Join(storeDir, "oci", "blobs", "sha256") }

// storedLayers are the layers whose blob a store has committed (a blob
// file only appears, by rename, once complete and verified).
func storedLayers(storeDir string, layers []v1.Descriptor) []v1.Descriptor {
	var out []v1.Descriptor
	for _, l := range layers {
		if _, err := os.Stat(filepath.Join(blobDir(storeDir), l.Digest.Hex)); err == nil {
			out = append(out, l)
		}
	}
	return out
}

// verifyStore checks that every blob a store holds hashes to its name:
// nothing partial or wrong was committed.
func verifyStore(t testing.TB, storeDir string) {
	t.Helper()
	entries, err := os.ReadDir(blobDir(storeDir))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if len(e.Name()) != 64 {
			continue // a temporary file
		}
		f, err := os.Open(filepath.Join(blobDir(storeDir), e.Name()))
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
			t.Errorf("store %s holds blob %s whose content hashes to %s", storeDir, e.Name(), got)
		}
		n++
	}
	if n == 0 {
		t.Errorf("store %s holds no blob", storeDir)
	}
}

// logLine is the part of a runner's JSON log line the tests read.
type logLine struct {
	Msg      string `json:"msg"`
	Snapshot string `json:"snapshot"`
	Attempt  int    `json:"attempt"`
	Load     *struct {
		Busy int64 `json:"busy"`
		Peak int64 `json:"peak"`
	} `json:"load"`
}

// pullLines are a process's "pull started", "pull done" and "pull failed"
// lines, in the order written.
func pullLines(t testing.TB, w *workerProc) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(w.logs()))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Msg {
		case "pull started", "pull done", "pull failed":
			out = append(out, l)
		}
	}
	return out
}

func stopProc(w *workerProc, sig syscall.Signal) {
	w.signal(sig)
	<-w.proc.Done()
}

// A runner SIGKILLed mid-pull and restarted on the same store finishes the
// pull on the activity's next attempt (after the heartbeat timeout, by
// default a few heartbeats: workflows.DefaultPullHeartbeat) without
// fetching again the layers it had finished: the registry sends each of
// those exactly once. Its log lines carry the runner's id once.
//
// The propagation's count is what the registry sent, both attempts': the
// killed attempt's bytes were recorded durably as they came (to the row's
// progress write that showed them), not carried in a heartbeat the SDK
// had not sent yet. Before ("durable-pull-bytes"), it counted the retry's
// bytes and the killed attempt's only as far as its first heartbeat.
func TestSnapshotPullResumesAfterRunnerKill(t *testing.T) {
	startCentral(t)
	// 5 layers of 2 MiB at 4 MiB/s: half a second per layer. The third
	// stops after 1 MiB until the runner is gone.
	const layerSize, held = 2 << 20, 1 << 20
	reg := startRegistry(t, ociregistry.Options{BytesPerSecond: 4 << 20})
	img := pushImage(t, reg, "snap/kill", 11, 5, layerSize)
	reg.HoldAfter(img.layers[2].Digest.String(), held, 1)
	id, dir := "kill-a", t.TempDir()
	first := startRunner(t, id, dir)

	name := snapName("kill")
	// A heartbeat timeout of 20s: the held layer's stall bound (10s) is
	// well past the kill.
	run := propagate(t, name, img.ref, workflows.PullTiming{Queue: 30 * time.Second, Fresh: time.Minute, Heartbeat: 20 * time.Second})
	// Wait until the runner's row shows every byte it was sent before the
	// kill: the config, the four other layers (the pull downloads blobs
	// concurrently, so those after the held one go on) and the held one's
	// first MiB.
	waitRow(t, id, name, "progress to the held byte", func(r snapshot.Row) bool {
		return r.BytesDone == img.config+4*layerSize+held
	})
	stopProc(first, syscall.SIGKILL)
	done := storedLayers(dir, img.layers)
	if len(done) == len(img.layers) {
		t.Fatal("the pull finished before the runner was killed: nothing to resume")
	}
	t.Logf("killed %s with %d of %d layers stored, %d bytes sent by the registry", id, len(done), len(img.layers), reg.BlobBytes())

	second := startRunner(t, id, dir)
	res := propagationResult(t, run, 2*time.Minute)
	if res.Ready != 1 || res.Digest != img.digest {
		t.Errorf("propagation = %+v, want 1 runner ready with %s", res, img.digest)
	}
	if row := rowOf(t, id, name); row.State != snapshot.RowReady {
		t.Fatalf("row = %+v, want ready", row)
	}
	verifyStore(t, dir)
	for _, l := range done {
		if sent, gets := reg.BlobBytesOf(l.Digest.String()), reg.BlobGetsOf(l.Digest.String()); sent != l.Size || gets != 1 {
			t.Errorf("layer %s, stored before the kill: the registry sent %d bytes in %d GETs, want %d in 1", l.Digest, sent, gets, l.Size)
		}
	}
	if total := reg.BlobBytes(); total > img.size+layerSize {
		t.Errorf("the registry sent %d blob bytes for a %d-byte image: more than one layer was fetched again", total, img.size)
	}
	// Each attempt resolves the tag: the manifest is sent by each.
	if sent := reg.BlobBytes() + int64(reg.ManifestGets())*img.manifest; res.FromRegistry != sent {
		t.Errorf("the propagation counted %d bytes from the registry, which sent %d (blobs and %d manifests)", res.FromRegistry, sent, reg.ManifestGets())
	}
	// The restarted process finished it, on a later attempt of the same
	// activity.
	var finished []logLine
	for _, l := range pullLines(t, second) {
		if l.Msg == "pull done" && l.Snapshot == name {
			finished = append(finished, l)
		}
	}
	if len(finished) != 1 || finished[0].Attempt < 2 {
		t.Errorf("the restarted runner logged %+v, want one \"pull done\" of a retried attempt", finished)
	}
	pulls := 0
	for line := range bytes.Lines(second.logs()) {
		if !bytes.Contains(line, []byte(`"msg":"pull `)) {
			continue
		}
		pulls++
		if bytes.Count(line, []byte(`"runner":`)) != 1 {
			t.Errorf("a log line carries the runner's id other than once: %s", line)
		}
	}
	if pulls == 0 {
		t.Error("the restarted runner logged no pull")
	}
}

// A runner that stops answering while its heartbeat is still fresh gets the
// pull, which ends in error "runner offline" once no poller took it within
// the queue bound; when the runner is back, a reconcile retries the row
// and the propagation it wakes (signal-with-start) makes it ready.
func TestSnapshotOfflineRunnerCatchesUpAfterReconcile(t *testing.T) {
	startCentral(t)
	reg := startRegistry(t, ociregistry.Options{})
	img := pushImage(t, reg, "snap/offline", 12, 2, 256<<10)
	id, dir := "offline-a", t.TempDir()
	// Registered (it polls, so its row exists) and then gone: SIGKILL
	// closes its connections, so the server hands its queue's tasks to no
	// one, and its last heartbeat is still fresh.
	stopProc(startRunner(t, id, dir), syscall.SIGKILL)

	const queue = 3 * time.Second
	name := snapName("offline")
	res := propagationResult(t, propagate(t, name, img.ref, workflows.PullTiming{Queue: queue, Fresh: time.Minute}), time.Minute)
	if res.Reason != snapshot.ReasonOffline || res.Ready != 0 {
		t.Errorf("propagation = %+v, want no runner ready, reason %q", res, snapshot.ReasonOffline)
	}
	row := rowOf(t, id, name)
	if row.State != snapshot.RowError || row.ErrorReason != snapshot.ReasonOffline {
		t.Fatalf("row = %+v, want error %q", row, snapshot.ReasonOffline)
	}
	if waited := row.UpdatedAt.Sub(row.CreatedAt); waited < queue-100*time.Millisecond || waited > queue+5*time.Second {
		t.Errorf("the row went to error %v after it was added, want about the %v queue bound", waited, queue)
	}
	if snap, err := env.Store.Snapshot(context.Background(), name); err != nil || snap.State != snapshot.Error {
		t.Errorf("snapshot = %+v, %v; want state error", snap, err)
	}

	startRunner(t, id, dir)
	rec := reconcile(t, workflows.ReconcileRunnersInput{RetryBase: time.Millisecond, Queue: 30 * time.Second, OfflineAfter: time.Minute})
	if rec.Retried != 1 || !slices.Contains(rec.Propagated, name) {
		t.Errorf("reconcile = %+v, want 1 row retried and %s propagated", rec, name)
	}
	if res := waitPropagation(t, name); res.Ready != 1 {
		t.Errorf("propagation after the reconcile = %+v, want 1 runner made ready", res)
	}
	if row := rowOf(t, id, name); row.State != snapshot.RowReady {
		t.Fatalf("row after the reconcile = %+v, want ready", row)
	}
	if snap, err := env.Store.Snapshot(context.Background(), name); err != nil || snap.State != snapshot.Active || snap.Digest != img.digest {
		t.Errorf("snapshot = %+v, %v; want active with digest %s", snap, err, img.digest)
	}
	verifyStore(t, dir)
}

// A burst of 7 snapshots on a runner of capacity 6 never runs more than 6
// pulls at once, yet runs them side by side, and all 7 end ready.
func TestSnapshotBurstRespectsRunnerCapacity(t *testing.T) {
	startCentral(t)
	// 7 images of 1 MiB through one 4 MiB/s link: 6 pulls at once take
	// about 1.5 s, so the 7th finds every slot taken.
	const n, capacity = 7, 6
	reg := startRegistry(t, ociregistry.Options{BytesPerSecond: 4 << 20})
	imgs := make([]testImage, n)
	for i := range imgs {
		imgs[i] = pushImage(t, reg, fmt.Sprintf("snap/burst%d", i), int64(20+i), 1, 1<<20)
	}
	id := "burst-a"
	r := startRunner(t, id, t.TempDir(), "--capacity", fmt.Sprint(capacity))

	names := make([]string, n)
	for i := range names {
		names[i] = snapName(fmt.Sprintf("burst%d", i))
		createSnapshot(t, names[i], imgs[i].ref)
	}
	runs := make([]client.WorkflowRun, n)
	for i, name := range names {
		run, err := workflows.StartPropagation(context.Background(), env.Client,
			workflows.PropagateSnapshotInput{Name: name, Timing: workflows.PullTiming{Queue: time.Minute, Fresh: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = run
	}
	for i, run := range runs {
		if res := propagationResult(t, run, 2*time.Minute); res.Ready != 1 {
			t.Errorf("%s: propagation = %+v, want ready", names[i], res)
		}
		if row := rowOf(t, id, names[i]); row.State != snapshot.RowReady {
			t.Errorf("%s: row = %+v, want ready", names[i], row)
		}
	}

	// Overlap as the log shows it (each pull's lines lie inside its
	// activity slot), and the runner's own count of work running at once.
	ours := map[string]bool{}
	for _, name := range names {
		ours[name] = true
	}
	running, overlap, peak, doneN := 0, 0, int64(0), 0
	for _, l := range pullLines(t, r) {
		if !ours[l.Snapshot] {
			continue
		}
		if l.Msg == "pull started" {
			running++
		} else {
			running--
		}
		if l.Msg == "pull done" {
			doneN++
		}
		overlap = max(overlap, running)
		if l.Load != nil {
			peak = max(peak, l.Load.Peak)
		}
	}
	t.Logf("%d pulls: at most %d overlapping in the log, load peak %d", doneN, overlap, peak)
	if doneN != n {
		t.Errorf("%d pulls done in the runner's log, want %d", doneN, n)
	}
	if overlap > capacity || peak > capacity {
		t.Errorf("%d pulls overlapped in the log, load peak %d: more than the capacity %d", overlap, peak, capacity)
	}
	if overlap < 2 {
		t.Errorf("at most %d pull ran at once: the burst was not run concurrently", overlap)
	}
	if peak == 0 {
		t.Error("the runner logged no load (activities.Runner.Load unset?)")
	}
}

// A runner pulling from a peer that dies mid-transfer finishes from the
// registry: the blob in flight and the rest come from there, what the peer
// sent before stays.
func TestSnapshotPeerDiesMidTransfer(t *testing.T) {
	startCentral(t)
	const layerSize = 2 << 20
	reg := startRegistry(t, ociregistry.Options{})
	img := pushImage(t, reg, "snap/peer", 13, 5, layerSize)

	// A serves peers at 2 MB/s: B's 10 MiB take about 5 s from it.
	idA, idB := "peer-a", "peer-b"
	a := startRunner(t, idA, t.TempDir(), "--peer-rate", "2MB")
	name := snapName("peer")
	if res := propagationResult(t, propagate(t, name, img.ref, workflows.PullTiming{Queue: 30 * time.Second, Fresh: time.Minute}),
		time.Minute); res.Ready != 1 {
		t.Fatalf("propagation to %s = %+v", idA, res)
	}

	// B joins: the reconcile finds the active snapshot unplaced on it and
	// propagates it, from A.
	dirB := t.TempDir()
	startRunner(t, idB, dirB)
	reg.ResetCounters()
	rec := reconcile(t, workflows.ReconcileRunnersInput{RetryBase: time.Hour, Queue: 30 * time.Second, OfflineAfter: time.Minute})
	if !slices.Contains(rec.Propagated, name) {
		t.Fatalf("reconcile = %+v, want %s propagated to the new runner", rec, name)
	}
	row := waitRow(t, idB, name, "a layer from "+idA, func(r snapshot.Row) bool {
		return r.State != snapshot.RowPulling || (r.Source == snapshot.PeerSource(idA) && r.BytesDone >= layerSize)
	})
	if row.State != snapshot.RowPulling {
		t.Fatalf("row of %s = %+v before %s could be killed", idB, row, idA)
	}
	stopProc(a, syscall.SIGKILL)
	t.Logf("killed %s with %d of %d bytes on %s", idA, row.BytesDone, row.BytesTotal, idB)

	res := waitPropagation(t, name)
	if row := rowOf(t, idB, name); row.State != snapshot.RowReady {
		t.Fatalf("row of %s = %+v, want ready", idB, row)
	}
	verifyStore(t, dirB)
	egress := reg.BlobBytes()
	t.Logf("propagation %+v; registry sent %d blob bytes of a %d-byte image", res, egress, img.size)
	// Every byte received counts, the peer's blob cut off by its death too.
	if res.Ready != 1 || res.FromPeers < layerSize || res.FromRegistry == 0 || res.FromPeers+res.FromRegistry < img.size {
		t.Errorf("propagation = %+v, want at least %d bytes, at least %d from the peer and some from the registry", res, img.size, layerSize)
	}
	if egress == 0 || egress >= img.size {
		t.Errorf("the registry sent %d blob bytes, want part of the %d-byte image", egress, img.size)
	}
	if egress != res.FromRegistry {
		t.Errorf("the registry sent %d blob bytes, the runner counted %d from it", egress, res.FromRegistry)
	}
}

// A runner process whose only slot a long pull holds still answers the
// reconcile: its listings and removals have their own slots, on its admin
// queue (runner-ID:admin), so the queue bound tests that it is alive, not
// that it is idle. Before, the listing queued behind the pull and the
// runner was reported unreachable.
func TestSnapshotBusyRunnerAnswersTheReconcile(t *testing.T) {
	startCentral(t)
	// 2 MiB at 128 KiB/s: the pull holds the slot for 16 s.
	reg := startRegistry(t, ociregistry.Options{BytesPerSecond: 128 << 10})
	img := pushImage(t, reg, "snap/busy", 14, 1, 2<<20)
	id := "busy-a"
	startRunner(t, id, t.TempDir(), "--capacity", "1")
	name := snapName("busy")
	run := propagate(t, name, img.ref, workflows.PullTiming{Queue: time.Minute, Fresh: time.Minute})
	waitRow(t, id, name, "the pull under way", func(r snapshot.Row) bool { return r.BytesDone > 0 })

	rec := reconcile(t, workflows.ReconcileRunnersInput{RetryBase: time.Hour, Queue: 3 * time.Second, OfflineAfter: time.Minute})
	if slices.Contains(rec.Unreachable, id) {
		t.Errorf("reconcile = %+v: the busy runner was reported unreachable", rec)
	}
	if row := rowOf(t, id, name); row.State != snapshot.RowPulling {
		t.Errorf("row = %+v: the pull ended before the reconcile, which proved nothing", row)
	}
	if res := propagationResult(t, run, 2*time.Minute); res.Ready != 1 {
		t.Errorf("propagation = %+v, want ready", res)
	}
}

// Pipelined propagation with real runner processes: the registry holds the
// last layer at a known byte (PauseAt) while the first runner pulls it, and
// every other runner — three from the first, one from one of those, as the
// planner builds the tree — has by then received every byte the first one
// has: config, the two finished layers and the held one up to the pause,
// while the first is still pulling. Nothing waits on time: the test waits
// for the rows to show those bytes.
//
// Released, the fleet is ready and the registry sent each blob exactly
// once, by its own counters: one copy. Killed instead (SIGKILL) while four
// runners read from it, the first runner's peers finish from the registry
// (their cut-off transfers are never stored: every store holds only blobs
// that match their digests), and the first finishes on its restart: every
// runner ends ready. Before (runners were sources only once ready), no
// runner received a byte from a peer until the first held the whole image.
func TestSnapshotPipelinedFanOut(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			startCentral(t)
			const layerSize, pauseAt = 1 << 20, 512 << 10
			reg := startRegistry(t, ociregistry.Options{})
			img := pushImage(t, reg, "snap/pipe", 21, 3, layerSize)
			held := img.layers[2].Digest.String()
			release := reg.PauseAt(held, pauseAt, ociregistry.Resumed)
			t.Cleanup(release)
			ids := []string{"pipe-a", "pipe-b", "pipe-c", "pipe-d", "pipe-e"}
			dirs := map[string]string{}
			procs := map[string]*workerProc{}
			for _, id := range ids {
				dirs[id] = t.TempDir()
				procs[id] = launchRunner(t, id, dirs[id])
			}
			for _, p := range procs {
				p.waitStarted(t)
			}
			reg.ResetCounters()
			name := snapName("pipe")
			// A heartbeat timeout of 20s: the killed runner's attempt is
			// retried on its restart.
			run := propagate(t, name, img.ref, workflows.PullTiming{Queue: time.Minute, Fresh: time.Minute, Heartbeat: 20 * time.Second})

			paused := img.config + 2*layerSize + pauseAt
			var root string
			poll.Until(t, "one runner pulling from the registry", time.Minute, func() (bool, string) {
				rows, err := env.Store.SnapshotRunners(context.Background(), name)
				for _, r := range rows {
					if r.Source == snapshot.Registry && r.BytesDone == paused {
						root = r.RunnerID
						return true, ""
					}
				}
				return false, fmt.Sprintf("rows %+v (%v)", rows, err)
			})
			for _, id := range ids {
				if id == root {
					continue
				}
				waitRow(t, id, name, "every byte the first runner has, from a peer", func(r snapshot.Row) bool {
					return strings.HasPrefix(r.Source, "peer:") && r.BytesDone == paused
				})
			}
			if r := rowOf(t, root, name); r.State != snapshot.RowPulling {
				t.Fatalf("the first runner's row %+v: it cannot be done, its last layer is held", r)
			}
			if kill {
				stopProc(procs[root], syscall.SIGKILL)
				startRunner(t, root, dirs[root])
			} else {
				release()
			}
			res := propagationResult(t, run, 3*time.Minute)
			for _, id := range ids {
				if r := rowOf(t, id, name); r.State != snapshot.RowReady {
					t.Errorf("row of %s = %+v, want ready", id, r)
				}
				verifyStore(t, dirs[id])
			}
			t.Logf("first runner %s; propagation %+v; registry sent %d blob bytes of a %d-byte image", root, res, reg.BlobBytes(), img.size)
			if kill {
				return
			}
			if res.Ready != len(ids) {
				t.Errorf("propagation = %+v, want %d ready", res, len(ids))
			}
			// One copy, by the registry's counters: each blob sent once, whole.
			for _, b := range img.layers {
				if sent, gets := reg.BlobBytesOf(b.Digest.String()), reg.BlobGetsOf(b.Digest.String()); sent != b.Size || gets != 1 {
					t.Errorf("blob %s: the registry sent %d bytes in %d GETs, want %d in 1", b.Digest, sent, gets, b.Size)
				}
			}
			if egress := reg.BlobBytes(); egress != img.size-img.manifest {
				t.Errorf("the registry sent %d blob bytes, want one copy: %d", egress, img.size-img.manifest)
			}
		})
	}
}
