package workflows_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/placement"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// fleetWorker is one worker of a small fleet in this process: its own
// mirror directory, polling its own Git queue.
type fleetWorker struct {
	id, dir string
	mirrors *mirror.Mirrors
	w       worker.Worker
}

// A repository's Git work runs on the worker that owns it: collected and
// re-collected with its scans, each repository is mirrored once, on its
// owner; a worker that stops taking work while its Git work waits in its
// queue hands it to the next owner once it is silent, within the bound;
// restarted on its mirror directory, it has its repositories back and
// fetches into their mirrors instead of cloning them.
func TestRepositoryAffinity(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	queue := "gitfleet-affinity-" + o
	t.Cleanup(func() {
		_, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE task_queue = $1`, queue)
	})
	scanner, err := activities.NewScanner("", testenv.FindingKey)
	if err != nil {
		t.Fatal(err)
	}
	control, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivity(&activities.Activities{Store: env.Store, Hosts: hosts, WorkerOffline: time.Hour})
		w.RegisterActivity(&activities.Shards{Store: env.Store, Scanner: scanner})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer control()
	// start starts (or restarts) worker id on its mirror directory.
	start := func(id, dir string) *fleetWorker {
		t.Helper()
		fw := &fleetWorker{id: id, dir: dir}
		if fw.mirrors, err = mirror.New(dir, nil); err != nil {
			t.Fatal(err)
		}
		fw.w = worker.New(env.Client, workflows.WorkerGitQueue(queue, fw.id), worker.Options{DisableWorkflowWorker: true})
		fw.w.RegisterActivity(&activities.Activities{Store: env.Store, Hosts: hosts, Mirrors: fw.mirrors})
		fw.w.RegisterActivity(&activities.Shards{Store: env.Store, Mirrors: fw.mirrors, Scanner: scanner, BatchBlobs: 50})
		if err := fw.w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fw.w.Stop)
		if err := env.Store.RegisterWorker(ctx, fw.id, queue); err != nil {
			t.Fatal(err)
		}
		return fw
	}
	fleet := map[string]*fleetWorker{}
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("%s-w%d", o, i)
		fleet[id] = start(id, filepath.Join(t.TempDir(), id))
		ids = append(ids, id)
	}
	collect := func(r repoid.ID) (workflows.CollectResult, client.WorkflowRun) {
		t.Helper()
		opts := workflows.CollectOptions(r)
		opts.TaskQueue = queue
		run, err := env.Client.ExecuteWorkflow(ctx, opts, workflows.Collect,
			workflows.CollectInput{Repo: r, Trigger: "manual", PlaceWait: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var res workflows.CollectResult
		if err := run.Get(wctx, &res); err != nil {
			for _, wid := range []string{run.GetID(), run.GetID() + "/identity", run.GetID() + "/scan"} {
				if d, derr := env.Client.DescribeWorkflowExecution(ctx, wid, ""); derr == nil {
					for _, pa := range d.GetPendingActivities() {
						t.Logf("%s: pending %s attempt %d state %s last failure %v", wid, pa.GetActivityType().GetName(), pa.GetAttempt(), pa.GetState(), pa.GetLastFailure())
					}
				}
			}
			t.Fatalf("collect %s: %v", r, err)
		}
		return res, run
	}
	// holders lists the workers holding a mirror of r.
	holders := func(r repoid.ID) []string {
		var out []string
		url := fg.CloneURL(r.Owner, r.Name)
		for _, id := range ids {
			if _, err := os.Stat(fleet[id].mirrors.Path(url)); err == nil {
				out = append(out, id)
			}
		}
		return out
	}
	var repos []repoid.ID
	for i := range 9 {
		name := fmt.Sprintf("app%d", i)
		createRepo(t, o, name, "README.md")
		repos = append(repos, id(o, name))
	}
	ownerOf := func(r repoid.ID, live []string) string {
		return placement.Owner(strings.ToLower(fg.CloneURL(r.Owner, r.Name)), live)
	}
	for round := range 2 {
		for _, r := range repos {
			commitFiles(t, o, r.Name, map[string]string{fmt.Sprintf("round%d.txt", round): "x\n"})
			res, _ := collect(r)
			if res.Scan == nil || res.Scan.Receipt == nil {
				t.Fatalf("round %d, %s: no scan (%+v)", round, r, res)
			}
			if got, want := holders(r), ownerOf(r, ids); len(got) != 1 || got[0] != want {
				t.Fatalf("round %d: %s is mirrored on %v, want its owner %s only", round, r, got, want)
			}
		}
	}

	// The owner of repos[0] stops taking work but still heartbeats: its
	// Git work waits in its queue. Once it is silent past the offline
	// bound, the work is placed again, on the next owner.
	r := repos[0]
	gone := ownerOf(r, ids)
	fleet[gone].w.Stop()
	commitFiles(t, o, r.Name, map[string]string{"after.txt": "x\n"})
	opts := workflows.CollectOptions(r)
	opts.TaskQueue = queue
	run, err := env.Client.ExecuteWorkflow(ctx, opts, workflows.Collect, workflows.CollectInput{Repo: r, Trigger: "manual", PlaceWait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now() - interval '2 hours' WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var res workflows.CollectResult
	if err := run.Get(wctx, &res); err != nil || res.Case != identity.CaseSame {
		t.Fatalf("collect with its owner gone: %+v, %v", res, err)
	}
	recordHistory(t, "collect-owner-changed", run.GetID(), run.GetRunID())
	// Its verification gave way to nothing (git-fallback-gives-way), its
	// scan checked the place it inherited (recheck-inherited-place).
	recordHistory(t, "resolve-identity-owner-changed", run.GetID()+"/identity", "")
	recordHistory(t, "execute-shard-owner-changed", run.GetID()+"/scan", "")
	var live []string
	for _, id := range ids {
		if id != gone {
			live = append(live, id)
		}
	}
	next := ownerOf(r, live)
	if next != placement.Rank(strings.ToLower(fg.CloneURL(r.Owner, r.Name)), ids)[1] {
		t.Fatalf("next owner %s is not second in rank", next)
	}
	if got := holders(r); len(got) != 2 || !slices.Contains(got, next) || !slices.Contains(got, gone) {
		t.Fatalf("after the owner went, %s is mirrored on %v, want %s (the old mirror stays on %s)", r, got, next, gone)
	}
	// The others stayed where they were: only the gone worker's moved.
	for _, r := range repos[1:] {
		if ownerOf(r, ids) != gone && ownerOf(r, live) != ownerOf(r, ids) {
			t.Fatalf("%s moved although its owner is alive", r)
		}
	}

	// The gone worker comes back, restarted on its mirror directory: its
	// repositories are its own again, and their mirrors are fetched into,
	// not cloned.
	fleet[gone] = start(gone, fleet[gone].dir)
	before := fg.Fetches()
	var back []repoid.ID
	for _, r := range repos {
		if ownerOf(r, ids) == gone {
			commitFiles(t, o, r.Name, map[string]string{"restart.txt": "x\n"})
			collect(r)
			back = append(back, r)
		}
	}
	after := fg.Fetches()
	for _, r := range back {
		key := r.Owner + "/" + r.Name
		if clones := after[key].Full - before[key].Full; clones != 0 || !slices.Contains(holders(r), gone) {
			t.Fatalf("after its owner restarted, %s was cloned %d times and is mirrored on %v; want fetched into %s's mirror",
				r, clones, holders(r), gone)
		}
		if after[key].Incremental == before[key].Incremental {
			t.Fatalf("after its owner restarted, %s was not fetched: %+v", r, after[key])
		}
	}
}

// A scan whose owner stops taking work after the run checked its place
// is placed again on the next owner, and takes the shard over there: its
// receipt is of a fence newer than the run's claim, so whatever the old
// owner may still run can no longer write (the activity's side:
// activities.TestAScanPlacedAgainTakesTheShardOver). Also records the
// path's history.
func TestScanPlacedAgainTakesTheShardOver(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	queue := "gitfleet-takeover-" + o
	scanner, err := activities.NewScanner("", testenv.FindingKey)
	if err != nil {
		t.Fatal(err)
	}
	control, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivity(&activities.Activities{Store: env.Store, Hosts: hosts})
		w.RegisterActivity(&activities.Shards{Store: env.Store, Scanner: scanner})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer control()
	w1, w2 := o+"-w1", o+"-w2"
	// w1 registers but takes nothing (it is paused); w2 works.
	mirrors, err := mirror.New(filepath.Join(t.TempDir(), "w2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw := worker.New(env.Client, workflows.WorkerGitQueue(queue, w2), worker.Options{DisableWorkflowWorker: true})
	gw.RegisterActivity(&activities.Activities{Store: env.Store, Hosts: hosts, Mirrors: mirrors})
	gw.RegisterActivity(&activities.Shards{Store: env.Store, Mirrors: mirrors, Scanner: scanner, BatchBlobs: 50})
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	defer gw.Stop()
	for _, id := range []string{w1, w2} {
		if err := env.Store.RegisterWorker(ctx, id, queue); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM workers WHERE task_queue = $1`, queue) }()
	// A repository w1 owns.
	var name string
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("app%d", i); placement.Owner(strings.ToLower(fg.CloneURL(o, n)), []string{w1, w2}) == w1 {
			name = n
		}
	}
	createRepo(t, o, name, "README.md")
	commitFiles(t, o, name, map[string]string{"a.txt": "x\n"})
	url := fg.CloneURL(o, name)
	spec := shard.Spec{Key: "target:" + url, Target: target.Target{Location: url}}
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.ShardWorkflowID(spec.Key), TaskQueue: queue},
		workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: spec, RefsDigest: "synced-by-the-job",
			Place: workflows.GitPlace{Location: url, Queue: workflows.WorkerGitQueue(queue, w1), Wait: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	// The scan waits in w1's queue (w1 was live when the run checked the
	// place); then w1 goes silent.
	poll.Until(t, "the scan never waited in w1's queue", 2*time.Minute, func() (bool, string) {
		d, err := env.Client.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if err != nil {
			return false, err.Error()
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetActivityType().GetName() == "ScanShard" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pending activities", len(d.GetPendingActivities()))
	})
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE workers SET last_heartbeat = now() - interval '2 hours' WHERE id = $1`, w1); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var res workflows.ExecuteShardResult
	if err := run.Get(wctx, &res); err != nil {
		t.Fatal(err)
	}
	sh, err := env.Store.ShardByID(ctx, res.ShardID)
	if err != nil {
		t.Fatal(err)
	}
	// The run claimed the shard once (fence 1); the scan placed again took
	// it over (fence 2) and the run checkpointed under that fence.
	if res.Status != shard.Done || res.Owners != 1 || res.Receipt == nil || res.Receipt.Fence != 2 || sh.Fence != 2 {
		t.Fatalf("scan placed again: %+v (receipt %+v), shard fence %d; want Done under fence 2, taken over from the run's claim (1)",
			res, res.Receipt, sh.Fence)
	}
	recordHistory(t, "execute-shard-scan-placed-again", run.GetID(), run.GetRunID())
}
