package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/ocistore"
)

func TestSnapshotAndRunnerCommandsRefuseBadInput(t *testing.T) {
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
	startTestRunner(t, runnerID)

	out, errOut, code := starter(t, "snapshot", "create", "cli-base", "--image", ref)
	if code != 0 || !strings.Contains(out, "Snapshot cli-base is active on 1 of 1 runner\n") || !strings.Contains(out, digest) {
		t.Fatalf("create: exit %d\n%s\n%s", code, out, errOut)
	}
	// Asking again joins: same snapshot, still one row.
	if out, errOut, code := starter(t, "snapshot", "create", "cli-base", "--image", ref); code != 0 || !strings.Contains(errOut, "Joining") {
		t.Errorf("second create: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := starter(t, "snapshot", "create", "cli-base", "--image", reg.Ref("cli/other", "1")); code != exitUsage ||
		!strings.Contains(errOut, "already exists") {
		t.Errorf("create under a taken name: exit %d, %s", code, errOut)
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

// startTestRunner runs a runner in this process: a store, a peer server,
// a worker on its task queue and its row in the runners table.
func startTestRunner(t *testing.T, id string) {
	t.Helper()
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
	activities.RegisterRunner(w, admin, &activities.Runner{ID: id, Store: env.Store, Images: images, WorkDir: t.TempDir()})
	for _, w := range []worker.Worker{w, admin} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		w.Stop()
		admin.Stop()
		peer.Close()
		_, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM runners WHERE id = $1`, id)
	})
}
