package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/ocistore"
)

func TestSnapshotAndRunnerCommandsRefuseBadInput(t *testing.T) {
	withVar(t, config.EnvSnapshotSources, "registry.example")
	o, _ := newRepo(t) // on the forge, never collected
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "create", "Bad/Name", "--image", "127.0.0.1:5000/a/b:1"}, "invalid snapshot name"},
		{[]string{"snapshot", "create", "../etc", "--image", "127.0.0.1:5000/a/b:1"}, "invalid snapshot name"},
		{[]string{"snapshot", "create", "ok"}, "exactly one of --image"},
		{[]string{"snapshot", "create", "ok", "--image", "a", "--from-repo", "b/c/d"}, "exactly one of --image"},
		{[]string{"snapshot", "create", "ok", "--image", "127.0.0.1:5000/A B:!!"}, "image reference"},
		{[]string{"snapshot", "create", "ok", "--image", "x:5000/a:1", "--base", "y/b:1"}, "--base goes with --from-repo"},
		// Only the build registry and GITFLEET_SNAPSHOT_SOURCES (here:
		// registry.example) are sources: runners pull with their own
		// credentials.
		{[]string{"snapshot", "create", "ok", "--image", "evil.example/a/b:1"}, "image evil.example/a/b: not an allowed snapshot source: runners pull only from registry.example"},
		{[]string{"snapshot", "create", "ok", "--image", "docker.io/library/b:1"}, "image index.docker.io/library/b: not an allowed snapshot source"},
		{[]string{"snapshot", "create", "ok", "--from-repo", fg.Host() + "/" + o + "/app", "--base", "evil.example:5000/b:1"},
			"base image evil.example:5000/b: not an allowed snapshot source"},
		{[]string{"snapshot", "create", "ok", "--from-repo", fg.Host() + "/" + o + "/app"}, "has not been collected"},
		{[]string{"snapshot", "create", "ok", "--from-repo", fg.Host() + "/" + o + "/app@abc123"}, "not a commit id"},
		{[]string{"snapshot", "create", "ok", "--from-repo", "not a repo"}, "invalid"},
		{[]string{"snapshot", "show", "nosuch"}, `snapshot "nosuch" does not exist`},
		{[]string{"snapshot", "where", "nosuch"}, `snapshot "nosuch" does not exist`},
		{[]string{"snapshot", "remove", "nosuch"}, `snapshot "nosuch" does not exist`},
		{[]string{"runner", "drain", "../../etc"}, "invalid runner id"},
		{[]string{"runner", "resume", "nosuch"}, `runner "nosuch" is not registered`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := starter(t, tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d mentioning %q", code, errOut, exitUsage, tc.want)
			}
		})
	}
	snaps, err := env.Store.Snapshots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if s.Name == "ok" {
			t.Errorf("a refused create left snapshot %+v behind", s)
		}
	}
}

func TestSnapshotLifecycleThroughTheCommandLine(t *testing.T) {
	reg, err := ociregistry.Start(ociregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	img, err := ociregistry.RandomImage(11, 2, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref("cli/base", "1")
	digest, err := reg.Push(ref, img)
	if err != nil {
		t.Fatal(err)
	}
	const runnerID = "cli-runner"
	withVar(t, config.EnvSnapshotSources, reg.Addr())
	startTestRunner(t, runnerID, reg.Addr())

	out, errOut, code := starter(t, "snapshot", "create", "cli-base", "--image", ref)
	if code != 0 || !strings.Contains(out, "Snapshot cli-base is active on 1 of 1 runner\n") || !strings.Contains(out, digest) {
		t.Fatalf("create: exit %d\n%s\n%s", code, out, errOut)
	}
	// Asking again joins: same snapshot, still one row.
	if out, errOut, code := starter(t, "snapshot", "create", "cli-base", "--image", ref); code != 0 || !strings.Contains(errOut, "Joining") {
		t.Errorf("second create: exit %d\n%s\n%s", code, out, errOut)
	}
	other, err := ociregistry.RandomImage(12, 1, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Push(reg.Ref("cli/other", "1"), other); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := starter(t, "snapshot", "create", "cli-base", "--image", reg.Ref("cli/other", "1")); code != exitUsage ||
		!strings.Contains(errOut, "already exists") {
		t.Errorf("create under a taken name: exit %d, %s", code, errOut)
	}
	// Asking by the digest of the image it holds by tag joins it (before:
	// refused as "another image").
	if out, errOut, code := starter(t, "snapshot", "create", "cli-base", "--image", snapshot.Repository(ref)+"@"+digest); code != 0 ||
		!strings.Contains(errOut, "Snapshot cli-base holds that image") || !strings.Contains(errOut, "Joining") {
		t.Errorf("create by digest: exit %d\n%s\n%s", code, out, errOut)
	}
	// An image the registry does not have is refused up front, exit 2,
	// and leaves nothing behind (before: tried on every runner in turn).
	if out, errOut, code := starter(t, "snapshot", "create", "cli-missing", "--image", reg.Ref("cli/nosuch", "1")); code != exitUsage ||
		!strings.Contains(errOut, "does not exist in its registry") {
		t.Errorf("create of a missing image: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := env.Store.Snapshot(context.Background(), "cli-missing"); err == nil {
		t.Error("the refused create left snapshot cli-missing behind")
	}
	// So is a missing --base, before any build.
	o, _ := newRepo(t)
	repo := fg.Host() + "/" + o + "/app"
	if out, errOut, code := starter(t, "collect", repo); code != 0 {
		t.Fatalf("collect: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := starter(t, "snapshot", "create", "cli-nobase", "--from-repo", repo, "--base", reg.Ref("cli/nobase", "1")); code != exitUsage ||
		!strings.Contains(errOut, "cli/nobase:1 does not exist in its registry") {
		t.Errorf("create on a missing base: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"snapshot", "list"}, []string{"cli-base", "active", "1/1"}},
		{[]string{"snapshot", "show", "cli-base"}, []string{"Snapshot cli-base: active", runnerID, "ready", "registry", "100%"}},
		{[]string{"snapshot", "show", "cli-base", "--watch"}, []string{runnerID, "ready"}},
		{[]string{"snapshot", "where", "cli-base"}, []string{runnerID}},
		{[]string{"runner", "list"}, []string{runnerID, "ready", "1 ready, 0 pulling, 0 error"}},
		{[]string{"runner", "drain", runnerID}, []string{"Runner cli-runner is draining"}},
		{[]string{"runner", "resume", runnerID}, []string{"Runner cli-runner is ready"}},
		{[]string{"snapshot", "remove", "cli-base"}, []string{"Removed snapshot cli-base from 1 runner"}},
		{[]string{"snapshot", "list"}, []string{"No snapshots"}},
	} {
		out, errOut, code := starter(t, tc.args...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%v: exit %d, want %q in\n%s\n%s", tc.args, code, w, out, errOut)
				break
			}
		}
	}
}

// withVar sets a variable of the starter's environment for the test.
func withVar(t *testing.T, k, v string) {
	old, had := vars[k]
	vars[k] = v
	t.Cleanup(func() {
		if had {
			vars[k] = old
		} else {
			delete(vars, k)
		}
	})
}

// startTestRunner runs a runner in this process: a store, a peer server,
// a worker on its task queue and its row in the runners table; it pulls
// from the sources listed.
func startTestRunner(t *testing.T, id string, sources string) {
	t.Helper()
	allowed, err := snapshot.ParseSources("", sources)
	if err != nil {
		t.Fatal(err)
	}
	images, err := ocistore.Open(filepath.Join(t.TempDir(), "oci"), 0)
	if err != nil {
		t.Fatal(err)
	}
	peer := httptest.NewServer(images.PeerHandler())
	if err := env.Store.RegisterRunner(context.Background(), snapshot.Runner{ID: id, PeerAddr: peer.Listener.Addr().String(), Capacity: 6}); err != nil {
		t.Fatal(err)
	}
	w := worker.New(env.Client, snapshot.TaskQueue(id), worker.Options{DisableWorkflowWorker: true})
	admin := worker.New(env.Client, snapshot.AdminTaskQueue(id), worker.Options{DisableWorkflowWorker: true})
	activities.RegisterRunner(w, admin, &activities.Runner{ID: id, Store: env.Store, Images: images, WorkDir: t.TempDir(), Sources: allowed})
	for _, w := range []worker.Worker{w, admin} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
	}
	// It heartbeats, as a runner process does, until the test ends.
	stop := make(chan struct{})
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = env.Store.HeartbeatRunner(context.Background(), id)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-beats
		w.Stop()
		admin.Stop()
		peer.Close()
		_, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM runners WHERE id = $1`, id)
	})
}

// What registries, peers and runners wrote is printed escaped: a reason
// holding terminal escape sequences (clear the screen, set the window
// title, a C1 control) shows as \x1b… text in 'snapshot show' and 'runner
// list', never as the bytes. Before, they reached the terminal raw.
func TestSnapshotShowAndRunnerListEscapeTerminalBytes(t *testing.T) {
	ctx := context.Background()
	const id, name = "cli-escapes", "cli-escapes"
	hostile := "pull failed: \x1b[2J\x1b]0;owned\x07\u009b31m gone"
	if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "127.0.0.1:1\x1b[8m", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, id) })
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: "127.0.0.1:1/a/b:1"}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Store.DeleteSnapshot(ctx, name) })
	if _, _, err := env.Store.InsertSnapshotRunner(ctx, id, name, snapshot.RowPulling, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.SetSnapshotState(ctx, name, snapshot.Error, hostile, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE snapshot_runners SET state = 'error', error_reason = $3, source = $4
		WHERE runner_id = $1 AND snapshot_ref = $2`, id, name, hostile, "peer:\x1b[1A"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"snapshot", "show", name}, {"runner", "list"}, {"snapshot", "list"}} {
		out, errOut, code := starter(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		if i := strings.IndexFunc(out, func(r rune) bool { return r == 0x1b || r == 0x07 || r == 0x9b }); i >= 0 {
			t.Errorf("%v prints a control character raw: %q", args, out)
		}
		want := map[string]string{"snapshot show": `pull failed: \x1b[2J\x1b]0;owned\x07\u009b31m gone`,
			"runner list": `127.0.0.1:1\x1b[8m`, "snapshot list": name}[args[0]+" "+args[1]]
		if !strings.Contains(out, want) {
			t.Errorf("%v: want %q in\n%s", args, want, out)
		}
	}
}

// 'runner list' derives what it shows from the heartbeat's age when read,
// by the database's clock: a runner stopped minutes ago is offline though
// its row says ready until the reconcile runs, one that missed a few
// heartbeats is silent. Runners sort naturally (r2 before r10). Before,
// both showed ready, and r10 came first.
func TestRunnerListStateFollowsTheHeartbeatsAge(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		id     string
		silent string // the heartbeat's age, a Postgres interval
		want   string
	}{
		{"nat-r10", "0 seconds", "ready"},
		{"nat-r2", "45 seconds", "silent"},
		{"nat-r9", "3 minutes", "offline"},
	} {
		if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: tc.id, PeerAddr: "127.0.0.1:1", Capacity: 1}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, tc.id) })
		if _, err := env.Store.Pool().Exec(ctx, `UPDATE runners SET last_heartbeat = now() - $2::interval WHERE id = $1`, tc.id, tc.silent); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := starter(t, "runner", "list")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var order []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "nat-") {
			continue
		}
		order = append(order, f[0])
		want := map[string]string{"nat-r10": "ready", "nat-r2": "silent", "nat-r9": "offline"}[f[0]]
		if f[1] != want {
			t.Errorf("%s shows %s, want %s:\n%s", f[0], f[1], want, out)
		}
	}
	if strings.Join(order, " ") != "nat-r2 nat-r9 nat-r10" {
		t.Errorf("order %v, want nat-r2 nat-r9 nat-r10:\n%s", order, out)
	}
}

func TestNaturalCompare(t *testing.T) {
	for _, tc := range []struct {
		x, y string
		want int
	}{
		{"r2", "r10", -1},
		{"r10", "r9", 1},
		{"r1", "r1", 0},
		{"r02", "r2", -1},
		{"a", "b", -1},
		{"r2a", "r2b", -1},
		{"r", "r1", -1},
		{"gpu-2-r10", "gpu-10-r1", -1},
	} {
		if got := naturalCompare(tc.x, tc.y); got != tc.want {
			t.Errorf("naturalCompare(%q, %q) = %d, want %d", tc.x, tc.y, got, tc.want)
		}
	}
}

// 'snapshot show' says when the reconcile retries a row in error: one
// that failed for a transient reason is due once its backoff ends (a
// reconcile run before that leaves it alone), one that failed for a reason
// no retry changes is not retried. Before, nothing said either.
func TestSnapshotShowSaysWhenTheNextRetryIsDue(t *testing.T) {
	ctx := context.Background()
	const name = "cli-retry-due"
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: "127.0.0.1:1/a/b:1"}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Store.DeleteSnapshot(ctx, name) })
	for _, tc := range []struct{ id, reason string }{{"retry-r1", snapshot.ReasonOffline}, {"retry-r2", "image 127.0.0.1:1/a/b:1 not found"}} {
		if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: tc.id, PeerAddr: "127.0.0.1:1", Capacity: 1}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, tc.id) })
		if _, _, err := env.Store.InsertSnapshotRunner(ctx, tc.id, name, snapshot.RowPulling, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Store.TransitionSnapshotRunner(ctx, tc.id, name, []snapshot.RowState{snapshot.RowPulling}, snapshot.RowError, tc.reason, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := starter(t, "snapshot", "show", name)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for id, want := range map[string]string{"retry-r1": "due in ", "retry-r2": "not retried by the reconcile ('snapshot create " + name + "' again retries it)"} {
		var line string
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, id+" ") {
				line = l
			}
		}
		if !strings.Contains(line, want) {
			t.Errorf("%s: want %q in %q\n%s", id, want, line, out)
		}
	}
}

// A runner that stopped heartbeating (a few intervals, by the database's
// clock) is sent no pull: 'snapshot create' names it instead of waiting for
// it. One that stops during the propagation is named in the progress, and
// once every pull left is on such a runner the command stops following:
// the snapshot is active on the others, the propagation gives the silent
// runner's pull up at its queue bound and the reconcile retries it. Before,
// the command sat on "1 ready, 1 pulling" for the whole queue bound and
// never said what it waited for.
func TestSnapshotCreateNamesTheSilentRunnerItWaitsFor(t *testing.T) {
	ctx := context.Background()
	reg, err := ociregistry.Start(ociregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	img, err := ociregistry.RandomImage(21, 1, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref("cli/silent", "1")
	if _, err := reg.Push(ref, img); err != nil {
		t.Fatal(err)
	}
	withVar(t, config.EnvSnapshotSources, reg.Addr())
	startTestRunner(t, "silent-live", reg.Addr())
	// Runners that registered, and nothing polls their queues.
	register := func(id, silent string) {
		t.Helper()
		if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "127.0.0.1:1", Capacity: 1}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = $1`, id) })
		if _, err := env.Store.Pool().Exec(ctx, `UPDATE runners SET last_heartbeat = now() - $2::interval WHERE id = $1`, id, silent); err != nil {
			t.Fatal(err)
		}
	}
	drop := func(name string) {
		t.Cleanup(func() {
			_ = env.Client.CancelWorkflow(ctx, "snapshot:"+name, "")
			_, _ = env.Store.Pool().Exec(ctx, `DELETE FROM snapshot_runners WHERE snapshot_ref = $1`, name)
			_ = env.Store.DeleteSnapshot(ctx, name)
		})
	}

	t.Run("stopped before", func(t *testing.T) {
		register("silent-before", "45 seconds")
		defer func() { _, _ = env.Store.Pool().Exec(ctx, `DELETE FROM runners WHERE id = 'silent-before'`) }()
		drop("cli-silent-before")
		out, errOut, code := starter(t, "snapshot", "create", "cli-silent-before", "--image", ref)
		if code != 0 || !strings.Contains(out, "Snapshot cli-silent-before is active on 1 of 1 runner\n") ||
			!strings.Contains(out, "not on    silent-before (no heartbeat for 4") || !strings.Contains(out, "s): stopped? the reconcile puts it there once back") {
			t.Fatalf("create: exit %d\n%s\n%s", code, out, errOut)
		}
	})

	t.Run("stopped during", func(t *testing.T) {
		// Sorted after silent-live, so that the registry's one slot goes to
		// the live runner first.
		register("silent-zz", "0 seconds")
		const name = "cli-silent-zz"
		drop(name)
		type result struct {
			out, errOut string
			code        int
		}
		done := make(chan result, 1)
		go func() {
			out, errOut, code := starter(t, "snapshot", "create", name, "--image", ref)
			done <- result{out, errOut, code}
		}()
		poll.Until(t, "the pull to silent-zz is waiting", time.Minute, func() (bool, string) {
			rows, err := env.Store.SnapshotRunners(ctx, name)
			for _, r := range rows {
				if r.RunnerID == "silent-zz" && r.State == snapshot.RowPulling {
					return true, ""
				}
			}
			return false, fmt.Sprint(rows, err)
		})
		// It stops: its heartbeat is 45 s old now, by the database's clock.
		if _, err := env.Store.Pool().Exec(ctx, `UPDATE runners SET last_heartbeat = now() - interval '45 seconds' WHERE id = 'silent-zz'`); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.code != 0 || !strings.Contains(r.out, "Snapshot "+name+" is active on 1 of 2 runners") ||
			!strings.Contains(r.out, "waiting   for silent-zz, which sent no heartbeat for 30s or more") {
			t.Fatalf("create: exit %d\n%s\n%s", r.code, r.out, r.errOut)
		}
		for _, want := range []string{"Ctrl-C stops following", "--no-wait", "waiting for silent-zz (no heartbeat for 30s or more)"} {
			if !strings.Contains(r.errOut, want) {
				t.Errorf("want %q on standard error:\n%s", want, r.errOut)
			}
		}
	})
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{2 * time.Minute: "2m", 90 * time.Second: "1m30s", 45 * time.Second: "45s",
		time.Hour: "1h", 59*time.Second + 600*time.Millisecond: "1m"} {
		if got := span(d); got != want {
			t.Errorf("span(%v) = %q, want %q", d, got, want)
		}
	}
}
