package workflows_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"gitfleet/internal/devstack/ociregistry"
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
