package workflows_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/placement"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/ocibuild"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// A repository with what an image layer must keep exactly: nested
// directories, an executable, symbolic links (stored, not followed, one
// dangling), an empty file and names with spaces and non-ASCII letters.
const buildFixture = `commit refs/heads/main
committer Forge Bot <forge@example.invalid> 1700000000 +0000
data 5
tree
M 100644 inline README.md
data 6
hello
M 100755 inline bin/run.sh
data 21
#!/bin/sh
echo run me
M 120000 inline docs/readme-link
data 12
../README.md
M 120000 inline dangling
data 10
no/such/fi
M 100644 inline "docs/a file ü.txt"
data 4
ü!

M 100644 inline empty
data 0

`

func TestBuildFromARepositoryMatchesGitArchiveAndRebuildsToTheSameDigest(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	builders := []*testRunner{
		startRunner(t, "build-a", runnerOpts{registry: reg.Addr() + "/gitfleet"}),
		startRunner(t, "build-b", runnerOpts{registry: reg.Addr() + "/gitfleet"}),
	}
	o := owner(t)
	startOwnerWorker(t, o+"-w", reg.Addr()+"/gitfleet")
	r, _ := createRepo(t, o, "tools")
	if err := fg.Import(o, "tools", strings.NewReader(buildFixture)); err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "tools"), identity.CaseNew)
	cb := codebase(t, res.CodebaseID)

	var digests []string
	for i := range 2 {
		name := snapName(fmt.Sprintf("build%d", i))
		out, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindRepo, Repo: cb.Repo().String(), CodebaseID: cb.ID,
			ExternalID: cb.ExternalID, Commit: res.Commit}, fast)
		if err != nil {
			t.Fatal(err)
		}
		requireReady(t, name, out.Digest, builders...)
		digests = append(digests, out.Digest)
		snap, _ := snapshotOf(t, name)
		if !strings.HasPrefix(snap.ImageRef, reg.Addr()+"/gitfleet/"+name+":") {
			t.Errorf("build pushed to %q", snap.ImageRef)
		}
		if i == 0 {
			img := storedImage(t, builders[1], out.Digest)
			got := layerFiles(t, img)
			want := archiveFiles(t, o, "tools", res.Commit)
			if diff := compareFiles(got, want); diff != "" {
				t.Errorf("the image's layer differs from git archive %s:\n%s", res.Commit, diff)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range map[string]string{ocibuild.LabelRevision: res.Commit, ocibuild.LabelRepository: cb.Repo().String(),
				ocibuild.LabelExternalID: fmt.Sprint(r.ID)} {
				if cfg.Config.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, cfg.Config.Labels[k], v)
				}
			}
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of commit %s: %s and %s", res.Commit, digests[0], digests[1])
	}
}

func snapshotOf(t *testing.T, name string) (snapshot.Snapshot, error) {
	t.Helper()
	return env.Store.Snapshot(context.Background(), name)
}

func storedImage(t *testing.T, r *testRunner, digest string) v1.Image {
	t.Helper()
	p, err := layout.FromPath(r.images.Dir())
	if err != nil {
		t.Fatal(err)
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// entry is what a tar entry says about a path.
type entry struct {
	kind    byte
	mode    int64
	content string
}

func layerFiles(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return tarFiles(t, rc)
}

func archiveFiles(t *testing.T, owner, name, commit string) map[string]entry {
	t.Helper()
	dir, err := fg.GitDir(owner, name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", dir, "archive", "--format=tar", commit).Output()
	if err != nil {
		t.Fatal(err)
	}
	return tarFiles(t, bytes.NewReader(out))
}

// tarFiles lists files and links (directories are implied by them).
func tarFiles(t *testing.T, r io.Reader) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = entry{kind: h.Typeflag, mode: h.Mode & 0o111, content: string(b)}
		case tar.TypeSymlink:
			out[h.Name] = entry{kind: h.Typeflag, content: h.Linkname}
		}
	}
}

func compareFiles(got, want map[string]entry) string {
	var b strings.Builder
	for p, w := range want {
		if g, ok := got[p]; !ok {
			fmt.Fprintf(&b, "  missing %s\n", p)
		} else if g != w {
			fmt.Fprintf(&b, "  %s: got %+v, want %+v\n", p, g, w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, "  extra %s\n", p)
		}
	}
	if len(want) == 0 {
		b.WriteString("  git archive listed nothing\n")
	}
	return b.String()
}

// A build has its own budget: an hour an attempt by default, not the ten
// minutes of a pull attempt. Here pulls get a second an attempt and the
// build needs a few (its base image comes from a slow registry): it
// completes, on the repository's worker, and the runner pulls it from the
// worker's registry. Before, the build had the pull's attempt and was cut
// off on every attempt until its window ended.
func TestABuildHasItsOwnBudget(t *testing.T) {
	// 512 KiB of base layer at 128 KiB/s: about 4 s to copy to the
	// registry builds go to.
	slow := startRegistry(t, ociregistry.Options{BytesPerSecond: 128 << 10})
	baseRef, _, _ := pushRandom(t, slow, "base/slow", 36, 1, 512<<10)
	reg := startRegistry(t, ociregistry.Options{})
	builder := startRunner(t, "budget-a", runnerOpts{registry: reg.Addr() + "/gitfleet"})
	o := owner(t)
	startOwnerWorker(t, o+"-w", reg.Addr()+"/gitfleet")
	createRepo(t, o, "budget")
	if err := fg.Import(o, "budget", strings.NewReader(buildFixture)); err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "budget"), identity.CaseNew)
	cb := codebase(t, res.CodebaseID)
	name := snapName("budget")
	out, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindRepo, Repo: cb.Repo().String(), CodebaseID: cb.ID,
		ExternalID: cb.ExternalID, Commit: res.Commit, BaseImage: baseRef},
		workflows.PullTiming{Attempt: time.Second, Window: 30 * time.Second, Queue: 30 * time.Second, Heartbeat: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out.Ready != 1 || out.Digest == "" {
		t.Fatalf("propagation = %+v, want the build ready", out)
	}
	requireReady(t, name, out.Digest, builder)
}

// A build whose push fails is retried from the repository's mirror: the
// Git host sees no request for it, however many attempts it takes.
// Before, a runner's first attempt fetched the commit from the host (and
// a retry resumed from that fetch).
func TestARetriedBuildReadsTheMirrorAgain(t *testing.T) {
	// The registry builds push to is down at first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	builder := startRunner(t, "resume-build", runnerOpts{registry: addr + "/gitfleet"})
	o := owner(t)
	startOwnerWorker(t, o+"-w", addr+"/gitfleet")
	createRepo(t, o, "resume")
	if err := fg.Import(o, "resume", strings.NewReader(buildFixture)); err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "resume"), identity.CaseNew)
	cb := codebase(t, res.CodebaseID)
	name := snapName("resume")
	ctx := context.Background()
	if _, _, err := env.Store.CreateSnapshot(ctx, snapshot.Snapshot{Name: name, Kind: snapshot.KindRepo, Repo: cb.Repo().String(),
		CodebaseID: cb.ID, ExternalID: cb.ExternalID, Commit: res.Commit}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	forget(t, name)
	before := gitRequests(o, "resume")
	run, err := workflows.StartPropagation(ctx, env.Client, workflows.PropagateSnapshotInput{Name: name, Timing: fast})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a failed build attempt", time.Minute, func() (bool, string) {
		d, err := env.Client.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if err != nil {
			return false, err.Error()
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == "BuildSnapshotFromMirror" && a.GetAttempt() >= 2 {
				return true, ""
			}
		}
		return false, fmt.Sprint(d.GetPendingActivities())
	})
	startRegistry(t, ociregistry.Options{Addr: addr})
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out workflows.PropagateSnapshotResult
	if err := run.Get(wctx, &out); err != nil {
		t.Fatal(err)
	}
	requireReady(t, name, out.Digest, builder)
	recordHistory(t, "propagate-snapshot-owner-build-retried", run.GetID(), run.GetRunID())
	if n := gitRequests(o, "resume") - before; n != 0 {
		t.Errorf("the build made %d Git requests, want none: the mirror holds the commit", n)
	}
}

// ownerWorker is a worker of the fleet in this process, polling its own
// Git queue for the workflows on the main task queue, registered in the
// workers table and heartbeating while the test runs: the repositories'
// Git work (collections, scans, snapshot builds) is placed on it, as on
// the only live worker. It goes when the test ends.
type ownerWorker struct {
	id      string
	mirrors *mirror.Mirrors
}

func startOwnerWorker(t testing.TB, id, registry string) *ownerWorker {
	t.Helper()
	ctx := context.Background()
	ow := &ownerWorker{id: id}
	var err error
	if ow.mirrors, err = mirror.New(filepath.Join(t.TempDir(), "mirrors"), nil); err != nil {
		t.Fatal(err)
	}
	ow.mirrors.SetCredentials(creds)
	scanner, err := activities.NewScanner("", testenv.FindingKey)
	if err != nil {
		t.Fatal(err)
	}
	sources, err := snapshot.ParseSources(registry, "127.0.0.1") // base images from the tests' registries
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(env.Client, workflows.WorkerGitQueue(workflows.TaskQueue, id), worker.Options{DisableWorkflowWorker: true})
	w.RegisterActivity(&activities.Activities{Store: env.Store, Mirrors: ow.mirrors, Hosts: hosts, Creds: creds})
	w.RegisterActivity(&activities.Shards{Store: env.Store, Mirrors: ow.mirrors, Scanner: scanner, BatchBlobs: 50, LeaseFor: 6 * time.Second})
	w.RegisterActivity(&activities.Validity{Store: env.Store, Mirrors: ow.mirrors, Scanner: scanner, Checker: checkerFrom(nil)})
	w.RegisterActivity(&activities.Builds{Worker: id, Mirrors: ow.mirrors, Hosts: hosts, Registry: registry, Sources: sources})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.RegisterWorker(ctx, id, workflows.TaskQueue); err != nil {
		t.Fatal(err)
	}
	// Heartbeats as a worker does (well within the offline bound, a
	// minute), so that a test longer than that keeps its worker live.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = env.Store.HeartbeatWorker(ctx, id, 0, 0)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		// Out of the table first: nothing is placed on it once it stops.
		if _, err := env.Store.Pool().Exec(ctx, `DELETE FROM workers WHERE id = $1`, id); err != nil {
			t.Error(err)
		}
		w.Stop()
	})
	return ow
}

// gitRequests counts the forge's Git requests for a repository (reference
// advertisements and fetches) in its request log.
func gitRequests(owner, name string) int {
	n := 0
	for _, r := range fg.Requests() {
		if r.Kind == forge.Git && (strings.HasPrefix(r.Path, "/"+owner+"/"+name+"/") || strings.HasPrefix(r.Path, "/"+owner+"/"+name+".git/")) {
			n++
		}
	}
	return n
}

// A snapshot from a repository is built on the worker that owns the
// repository (issue 23): on its Git queue, from the mirror the
// repository's collection left there, so the Git host sees no request for
// the build; the image goes to the worker's registry and every runner
// pulls it, the one that used to build included. Before, the first
// runner fetched the commit from the host and built it.
func TestASnapshotIsBuiltOnTheRepositorysOwnerFromItsMirror(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, ociregistry.Options{})
	o := owner(t)
	fleet := map[string]*ownerWorker{}
	var ids []string
	for i := range 2 {
		ow := startOwnerWorker(t, fmt.Sprintf("%s-w%d", o, i), reg.Addr()+"/gitfleet")
		fleet[ow.id] = ow
		ids = append(ids, ow.id)
	}
	var runners []*testRunner
	for i := range 3 {
		runners = append(runners, startRunner(t, fmt.Sprintf("owner-build-%d", i), runnerOpts{registry: reg.Addr() + "/gitfleet"}))
	}
	createRepo(t, o, "tools")
	if err := fg.Import(o, "tools", strings.NewReader(buildFixture)); err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "tools"), identity.CaseNew)
	cb := codebase(t, res.CodebaseID)
	url := fg.CloneURL(o, "tools")
	own := placement.Owner(strings.ToLower(url), ids)
	for _, wid := range ids {
		_, err := os.Stat(fleet[wid].mirrors.Path(url))
		if held := err == nil; held != (wid == own) {
			t.Fatalf("worker %s holds a mirror: %t; the owner is %s", wid, held, own)
		}
	}

	before := gitRequests(o, "tools")
	name := snapName("owner")
	out, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindRepo, Repo: cb.Repo().String(), CodebaseID: cb.ID,
		ExternalID: cb.ExternalID, Commit: res.Commit}, fast)
	if err != nil {
		t.Fatal(err)
	}
	if n := gitRequests(o, "tools") - before; n != 0 {
		t.Errorf("the build made %d Git requests to the host, want none: the owner's mirror holds the commit", n)
	}
	requireReady(t, name, out.Digest, runners...)
	if out.Ready != len(runners) {
		t.Errorf("propagation %+v: want every runner made ready by a pull", out)
	}
	snap, err := snapshotOf(t, name)
	if err != nil || !strings.HasPrefix(snap.ImageRef, reg.Addr()+"/gitfleet/"+name+":") || snap.State != snapshot.Active {
		t.Errorf("snapshot %+v (%v): want active, pushed to the worker's registry", snap, err)
	}
	// Where the history says the build ran: the owner's queue; no runner
	// built.
	var built []string
	it := env.Client.GetWorkflowHistory(ctx, workflows.PropagateSnapshotWorkflowID(name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			switch a.GetActivityType().GetName() {
			case "BuildSnapshotFromMirror", "BuildSnapshot":
				built = append(built, a.GetActivityType().GetName()+" on "+a.GetTaskQueue().GetName())
			}
		}
	}
	if want := []string{"BuildSnapshotFromMirror on " + workflows.WorkerGitQueue(workflows.TaskQueue, own)}; !slices.Equal(built, want) {
		t.Errorf("builds scheduled: %v, want %v", built, want)
	}
	recordHistory(t, "propagate-snapshot-build-on-owner", workflows.PropagateSnapshotWorkflowID(name), "")
}

// A worker without a registry to push to refuses the build at once, for
// good, saying which setting is missing: the propagation ends instead of
// waiting for a retry that cannot help, and the snapshot is not created.
func TestABuildOnAWorkerWithoutARegistryFailsNamingTheSetting(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	startRunner(t, "no-registry", runnerOpts{registry: reg.Addr() + "/gitfleet"})
	o := owner(t)
	startOwnerWorker(t, o+"-w", "")
	createRepo(t, o, "tools")
	if err := fg.Import(o, "tools", strings.NewReader(buildFixture)); err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "tools"), identity.CaseNew)
	cb := codebase(t, res.CodebaseID)
	name := snapName("noreg")
	_, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindRepo, Repo: cb.Repo().String(), CodebaseID: cb.ID,
		ExternalID: cb.ExternalID, Commit: res.Commit}, fast)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) || !strings.Contains(app.Error(), "GITFLEET_REGISTRY") ||
		!strings.Contains(app.Error(), o+"-w") {
		t.Fatalf("propagation error %v, want Permanent naming the worker and GITFLEET_REGISTRY", err)
	}
	if _, err := snapshotOf(t, name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the snapshot is still there (%v), want it abandoned", err)
	}
}
