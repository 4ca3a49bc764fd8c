package workflows_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/ocibuild"
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
		recordHistory(t, fmt.Sprintf("propagate-snapshot-build-%d", i), workflows.PropagateSnapshotWorkflowID(name), "")
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
// completes. Before, the build had the pull's attempt and was cut off on
// every attempt until its window ended.
func TestABuildHasItsOwnBudget(t *testing.T) {
	// 512 KiB of base layer at 128 KiB/s: about 4 s to put in the store.
	slow := startRegistry(t, ociregistry.Options{BytesPerSecond: 128 << 10})
	baseRef, _, _ := pushRandom(t, slow, "base/slow", 36, 1, 512<<10)
	builder := startRunner(t, "budget-a", runnerOpts{registry: slow.Addr() + "/gitfleet"})
	o := owner(t)
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
	recordHistory(t, "propagate-snapshot-build-budget", workflows.PropagateSnapshotWorkflowID(name), "")
}

// A build whose push fails is retried from the commit its first attempt
// fetched: the repository is fetched once. Before, every attempt started
// over in an empty directory.
func TestARetriedBuildResumesFromTheFetchedCommit(t *testing.T) {
	// The registry builds push to is down at first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	builder := startRunner(t, "resume-build", runnerOpts{registry: addr + "/gitfleet"})
	o := owner(t)
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
	fetches := func() int {
		n := 0
		for _, r := range fg.Requests() {
			if r.Method == "POST" && strings.Contains(r.Path, o+"/resume") && strings.HasSuffix(r.Path, "git-upload-pack") {
				n++
			}
		}
		return n
	}
	before := fetches()
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
			if a.GetActivityType().GetName() == "BuildSnapshot" && a.GetAttempt() >= 2 {
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
	recordHistory(t, "propagate-snapshot-build-resumed", run.GetID(), run.GetRunID())
	if n := fetches() - before; n != 1 {
		t.Errorf("the commit was fetched %d times, want once", n)
	}
}
