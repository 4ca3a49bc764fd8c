package workflows_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/ocistore"
	"gitfleet/workflows"
)

// An image pulled after the reconcile read a runner's rows and before it
// listed the runner's store — a new snapshot's row added, pulled and made
// ready in between — is not an orphan: it stays, with its row ready. The
// hook runs the pull inside the runner's listing activity, before the
// listing, so the race happens every time. Before, the rows were read
// only before the listing and the image was removed while its row said
// ready.
func TestReconcileKeepsAnImagePulledWhileItLooked(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, _ := pushRandom(t, reg, "snap/race", 30, 1, 64<<10)
	name := snapName("race")
	var r *testRunner
	var once sync.Once
	r = startRunner(t, "race-a", runnerOpts{beforeList: func(ctx context.Context) {
		once.Do(func() {
			now := time.Now().UTC()
			if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, now); err != nil {
				t.Error(err)
				return
			}
			if _, _, err := env.Store.InsertSnapshotRunner(ctx, r.id, name, snapshot.RowPulling, now); err != nil {
				t.Error(err)
				return
			}
			if _, err := r.images.Pull(ctx, name, ref, []ocistore.Source{{Name: snapshot.Registry, Registry: reg.Addr(), Insecure: true}},
				ocistore.PullOptions{}); err != nil {
				t.Error(err)
				return
			}
			if err := env.Store.SetSnapshotImage(ctx, name, "", digest, now); err != nil {
				t.Error(err)
			}
			if _, err := env.Store.TransitionSnapshotRunner(ctx, r.id, name, []snapshot.RowState{snapshot.RowPulling}, snapshot.RowReady, "", now); err != nil {
				t.Error(err)
			}
			if _, err := env.Store.ActivateSnapshot(ctx, name, now); err != nil {
				t.Error(err)
			}
		})
	}})
	forget(t, name)

	res := reconcile(t, workflows.ReconcileRunnersInput{Queue: 30 * time.Second})
	if res.Removed != 0 || res.Repulled != 0 || res.Checked != 1 {
		t.Errorf("reconcile = %+v, want 1 runner checked and nothing to fix", res)
	}
	requireReady(t, name, digest, r)
}

// A runner whose every slot is taken by a long pull still answers the
// reconcile and a removal: listings and removals have slots of their own
// on its admin queue, so the queue bound tests whether the runner is
// alive, not whether it is busy. Before, they queued behind the pull and
// the busy runner was reported unreachable and its removal left waiting.
func TestABusyRunnerAnswersItsAdminWork(t *testing.T) {
	quick := startRegistry(t, ociregistry.Options{})
	// 1 MiB at 64 KiB/s: the pull holds the runner's only slot for 16 s.
	slow := startRegistry(t, ociregistry.Options{BytesPerSecond: 64 << 10})
	smallRef, _, _ := pushRandom(t, quick, "snap/small", 31, 1, 32<<10)
	bigRef, _, _ := pushRandom(t, slow, "snap/big", 32, 1, 1<<20)
	r := startRunner(t, "busy-a", runnerOpts{capacity: 1})
	small := snapName("busy-small")
	if _, err := propagate(t, snapshot.Snapshot{Name: small, Kind: snapshot.KindImage, ImageRef: smallRef}, fast); err != nil {
		t.Fatal(err)
	}
	big := snapName("busy-big")
	ctx := context.Background()
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: big, Kind: snapshot.KindImage, ImageRef: bigRef}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	forget(t, big)
	if _, err := workflows.StartPropagation(ctx, env.Client, workflows.PropagateSnapshotInput{Name: big,
		Timing: workflows.PullTiming{Queue: time.Minute, Heartbeat: 10 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the long pull running", time.Minute, func() (bool, string) {
		return r.load.Busy() == 1, fmt.Sprintf("busy %d", r.load.Busy())
	})

	const queue = 3 * time.Second
	res := reconcile(t, workflows.ReconcileRunnersInput{Queue: queue})
	if slices.Contains(res.Unreachable, r.id) || res.Checked != 1 {
		t.Errorf("reconcile = %+v, want the busy runner checked", res)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	run, err := env.Client.ExecuteWorkflow(rctx, client.StartWorkflowOptions{ID: workflows.RemoveSnapshotWorkflowID(small), TaskQueue: workflows.TaskQueue},
		workflows.RemoveSnapshot, workflows.RemoveSnapshotInput{Name: small, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	var removed workflows.RemoveSnapshotResult
	if err := run.Get(rctx, &removed); err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "remove-snapshot-admin-queue", run.GetID(), run.GetRunID())
	if removed.Removed != 1 || !removed.Deleted || len(removed.Waiting) != 0 {
		t.Errorf("removal = %+v, want removed from the busy runner", removed)
	}
	if r.load.Busy() != 1 {
		t.Error("the long pull ended before the admin work: the test proved nothing")
	}
}

// A hung peer costs a pull half its heartbeat timeout, not the attempt:
// the stall bound is below the heartbeat timeout, so the runner gives the
// peer up and tells Temporal so before Temporal gives up on the attempt,
// and the pull finishes from the registry. Before, the stall bound (30 s)
// was the heartbeat timeout, the handshake and manifest GET had none, and
// every retried attempt went back to the same peer until the window ended.
func TestAPullFromAHungPeerFinishesFromTheRegistry(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, _ := pushRandom(t, reg, "snap/hung", 33, 2, 128<<10)
	var asked atomic.Int64
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hung.Close() })

	// The hung runner holds the snapshot ready, so the planner sends the
	// new runner to it.
	ctx := context.Background()
	name := snapName("hung")
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	forget(t, name)
	const hungID = "hung-peer"
	if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: hungID, PeerAddr: strings.TrimPrefix(hung.URL, "http://"), Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, hungID) })
	if err := env.Store.SetRunnerState(ctx, hungID, snapshot.RunnerDraining, time.Now().UTC()); err != nil {
		t.Fatal(err) // draining: it serves, and is sent no pull of its own
	}
	if err := env.Store.SetSnapshotImage(ctx, name, "", digest, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Store.InsertSnapshotRunner(ctx, hungID, name, snapshot.RowReady, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.ActivateSnapshot(ctx, name, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	r := startRunner(t, "hung-b", runnerOpts{})

	run, err := workflows.StartPropagation(ctx, env.Client, workflows.PropagateSnapshotInput{Name: name,
		Timing: workflows.PullTiming{Queue: 30 * time.Second, Heartbeat: 2 * time.Second, Window: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var res workflows.PropagateSnapshotResult
	if err := run.Get(wctx, &res); err != nil {
		t.Fatal(err)
	}
	row := rowsOf(t, name)[r.id]
	if res.Ready != 1 || row.State != snapshot.RowReady || row.Source != snapshot.Registry {
		t.Fatalf("propagation %+v, row %+v: want ready from the registry", res, row)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the hung peer was asked %d times, want once", n)
	}
	recordHistory(t, "propagate-snapshot-hung-peer", run.GetID(), run.GetRunID())
	attempts := pullAttempts(t, run.GetID(), run.GetRunID())
	if attempts != 1 {
		t.Errorf("the pull took %d attempts, want 1", attempts)
	}
}

// pullAttempts is the attempt a run's PullSnapshot completed on.
func pullAttempts(t *testing.T, workflowID, runID string) int32 {
	t.Helper()
	it := env.Client.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	pulls := map[int64]bool{}
	var attempt int32
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "PullSnapshot" {
			pulls[e.GetEventId()] = true
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && pulls[a.GetScheduledEventId()] {
			attempt = max(attempt, a.GetAttempt())
		}
	}
	return attempt
}

// A reconcile of 10,000 rows (4 runners holding 2,500 snapshots each)
// works, a page at a time: no payload of its history comes near
// Temporal's 2 MB limit, and what is wrong at the far end of the names —
// a ready row whose image is gone, an image no row accounts for — is
// found. Before, one activity returned every runner with every row, over
// 2 MB from about 8,000 rows, and every reconcile failed.
func TestReconcileOfTenThousandRowsGoesByPages(t *testing.T) {
	const perRunner = 2500
	reg := startRegistry(t, ociregistry.Options{})
	ref, digest, _ := pushRandom(t, reg, "snap/far", 34, 1, 32<<10)
	orphanRef, _, _ := pushRandom(t, reg, "snap/far-orphan", 35, 1, 16<<10)
	var runners []*testRunner
	var ids []string
	for i := range 4 {
		r := startRunner(t, fmt.Sprintf("pages-%d", i), runnerOpts{})
		runners, ids = append(runners, r), append(ids, r.id)
	}
	ctx := context.Background()
	prefix := snapName("pages")
	if _, err := env.Store.Pool().Exec(ctx, `
		INSERT INTO snapshots (name, kind, image_ref, state, error_reason, created_at, updated_at)
		SELECT $1 || '-' || lpad(i::text, 5, '0'), 'image', 'reg.invalid/none:1', 'error', 'image exceeds store quota', now(), now()
		FROM generate_series(1, $2) i`, prefix, perRunner); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.Store.Pool().Exec(ctx, `DELETE FROM snapshots WHERE name LIKE $1 || '-%'`, prefix)
	})
	if _, err := env.Store.Pool().Exec(ctx, `
		INSERT INTO snapshot_runners (runner_id, snapshot_ref, state, error_reason, created_at, updated_at)
		SELECT r, $1 || '-' || lpad(i::text, 5, '0'), 'error', 'image exceeds store quota', now(), now()
		FROM unnest($3::text[]) r, generate_series(1, $2) i`, prefix, perRunner, ids); err != nil {
		t.Fatal(err)
	}
	// Past the last seeded name: a lost image on the last runner, an
	// orphan on the third.
	lost := prefix + "-zz-lost"
	now := time.Now().UTC()
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: lost, Kind: snapshot.KindImage, ImageRef: ref}, now); err != nil {
		t.Fatal(err)
	}
	forget(t, lost)
	if err := env.Store.SetSnapshotImage(ctx, lost, "", digest, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Store.InsertSnapshotRunner(ctx, ids[3], lost, snapshot.RowReady, now); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.ActivateSnapshot(ctx, lost, now); err != nil {
		t.Fatal(err)
	}
	orphan := prefix + "-zz-orphan"
	if _, err := runners[2].images.Pull(ctx, orphan, orphanRef, []ocistore.Source{{Name: snapshot.Registry, Registry: reg.Addr(), Insecure: true}},
		ocistore.PullOptions{}); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	run, err := env.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{ID: "test-reconcile-" + prefix, TaskQueue: workflows.TaskQueue},
		workflows.ReconcileRunners, workflows.ReconcileRunnersInput{Queue: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	firstRun := run.GetRunID() // Get follows the runs a continue-as-new starts
	var res workflows.ReconcileRunnersResult
	if err := run.Get(wctx, &res); err != nil {
		t.Fatal(err)
	}
	largest, events, runs := largestPayload(t, run.GetID(), firstRun)
	t.Logf("reconcile of %d rows: %+v; %d runs, %d events, largest payload %d bytes", 4*perRunner, res, runs, events, largest)
	if largest > 1<<20 {
		t.Errorf("a payload of %d bytes: the reconcile does not page", largest)
	}
	if res.Checked < 4 || res.Repulled != 1 || res.Removed != 1 || len(res.Unreachable) != 0 || res.Retried != 0 {
		t.Errorf("reconcile = %+v, want 4 runners checked, 1 image pulled again and 1 removed", res)
	}
	if _, ok, _ := runners[2].images.Image(orphan); ok {
		t.Error("the orphan past the last page is still there")
	}
	waitPropagation(t, lost)
	requireReady(t, lost, digest, runners...)
}

// largestPayload follows a workflow's runs (continued as new) and returns
// the largest payload any event carried, the events and the runs.
func largestPayload(t *testing.T, workflowID, runID string) (largest, events, runs int) {
	t.Helper()
	for runID != "" {
		runs++
		next := ""
		it := env.Client.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			var p interface{ GetPayloads() []*commonpb.Payload }
			switch {
			case e.GetActivityTaskScheduledEventAttributes() != nil:
				p = e.GetActivityTaskScheduledEventAttributes().GetInput()
			case e.GetActivityTaskCompletedEventAttributes() != nil:
				p = e.GetActivityTaskCompletedEventAttributes().GetResult()
			case e.GetWorkflowExecutionStartedEventAttributes() != nil:
				p = e.GetWorkflowExecutionStartedEventAttributes().GetInput()
			case e.GetWorkflowExecutionCompletedEventAttributes() != nil:
				p = e.GetWorkflowExecutionCompletedEventAttributes().GetResult()
			case e.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
				a := e.GetWorkflowExecutionContinuedAsNewEventAttributes()
				p, next = a.GetInput(), a.GetNewExecutionRunId()
			}
			if p == nil {
				continue
			}

			n := 0
			for _, pl := range p.GetPayloads() {
				n += proto.Size(pl)
			}
			largest = max(largest, n)
		}
		runID = next
	}
	return largest, events, runs
}

// A pull that finds every slot of a live runner taken waits for one: the
// queue bound ends in "runner offline" only when the runner's admin queue
// does not answer either. Before, a runner busy with one long pull failed
// every other pull sent to it as offline.
func TestAPullToABusyRunnerWaitsForASlot(t *testing.T) {
	quick := startRegistry(t, ociregistry.Options{})
	// 512 KiB at 64 KiB/s: the first pull holds the only slot for 8 s.
	slow := startRegistry(t, ociregistry.Options{BytesPerSecond: 64 << 10})
	smallRef, smallDigest, _ := pushRandom(t, quick, "snap/wait-small", 37, 1, 32<<10)
	bigRef, _, _ := pushRandom(t, slow, "snap/wait-big", 38, 1, 512<<10)
	r := startRunner(t, "wait-a", runnerOpts{capacity: 1})
	ctx := context.Background()
	big := snapName("wait-big")
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: big, Kind: snapshot.KindImage, ImageRef: bigRef}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	forget(t, big)
	if _, err := workflows.StartPropagation(ctx, env.Client, workflows.PropagateSnapshotInput{Name: big,
		Timing: workflows.PullTiming{Queue: time.Minute, Heartbeat: 10 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the long pull running", time.Minute, func() (bool, string) {
		return r.load.Busy() == 1, fmt.Sprintf("busy %d", r.load.Busy())
	})
	small := snapName("wait-small")
	res, err := propagate(t, snapshot.Snapshot{Name: small, Kind: snapshot.KindImage, ImageRef: smallRef},
		workflows.PullTiming{Queue: 2 * time.Second, Heartbeat: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	recordHistory(t, "propagate-snapshot-busy-runner", workflows.PropagateSnapshotWorkflowID(small), "")
	if res.Ready != 1 || res.Failed != 0 {
		t.Errorf("propagation to the busy runner = %+v, want ready once a slot was free", res)
	}
	requireReady(t, small, smallDigest, r)
}
