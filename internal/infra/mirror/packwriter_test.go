package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
)

// recordPacks records the indexes of the packs the mirrors write.
func recordPacks(t *testing.T) func() []*gitread.Index {
	var mu sync.Mutex
	var got []*gitread.Index
	testHookPackIndexed = func(ix *gitread.Index) {
		mu.Lock()
		got = append(got, ix)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookPackIndexed = nil })
	return func() []*gitread.Index {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
}

// generated creates owner/name on the forge from a generated history
// (annotated tags included), repacked with long delta chains.
func generated(t *testing.T, fg *forge.Forge, owner, name string, spec repogen.Spec) {
	t.Helper()
	if _, err := fg.CreateRepo(owner, name); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := repogen.Stream(&stream, spec); err != nil {
		t.Fatal(err)
	}
	if err := fg.Import(owner, name, &stream); err != nil {
		t.Fatal(err)
	}
	dir, err := fg.GitDir(owner, name)
	if err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, nil, "repack", "-adf", "-q", "--depth=50", "--window=50")
}

// checkMirror checks the mirror at dir against the remote's repository:
// each pack's index is the one `git index-pack` writes for it, no
// temporary file is left, `git fsck` finds nothing wrong, and go-git reads
// every object reachable from the refs, which are the remote's.
func checkMirror(t *testing.T, dir, remoteDir string) {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) == 0 {
		t.Fatal("no pack in the mirror")
	}
	scratch := t.TempDir()
	for _, p := range packs {
		ours, err := os.ReadFile(strings.TrimSuffix(p, ".pack") + ".idx")
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(scratch, filepath.Base(p)+".idx")
		gittest.Git(t, scratch, nil, "index-pack", "-o", out, p)
		theirs, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s: index differs from git index-pack's", filepath.Base(p))
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_*")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	if out := gittest.Git(t, dir, nil, "fsck", "--full", "--no-dangling"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck: %s", out)
	}
	refs := func(d string) string {
		return gittest.Git(t, d, nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags")
	}
	if a, b := refs(dir), refs(remoteDir); a != b {
		t.Errorf("mirror refs:\n%s\nremote refs:\n%s", a, b)
	}

	// go-git reads every object reachable from the refs.
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[plumbing.Hash]bool{}
	var walkTree func(h plumbing.Hash)
	walkTree = func(h plumbing.Hash) {
		if seen[h] {
			return
		}
		seen[h] = true
		tree, err := repo.TreeObject(h)
		if err != nil {
			t.Fatalf("tree %s: %v", h, err)
		}
		for _, e := range tree.Entries {
			switch {
			case e.Mode == filemode.Dir:
				walkTree(e.Hash)
			case e.Mode == filemode.Submodule || seen[e.Hash]:
			default:
				seen[e.Hash] = true
				blob, err := repo.BlobObject(e.Hash)
				if err != nil {
					t.Fatalf("blob %s: %v", e.Hash, err)
				}
				r, err := blob.Reader()
				if err != nil {
					t.Fatal(err)
				}
				n, err := io.Copy(io.Discard, r)
				r.Close()
				if err != nil || n != blob.Size {
					t.Fatalf("blob %s: %d of %d bytes, %v", e.Hash, n, blob.Size, err)
				}
			}
		}
	}
	iter, err := repo.References()
	if err != nil {
		t.Fatal(err)
	}
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference {
			return nil
		}
		h := ref.Hash()
		for {
			tag, err := repo.TagObject(h)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				break
			}
			if err != nil {
				return err
			}
			seen[h] = true
			h = tag.Target
		}
		commits, err := repo.Log(&git.LogOptions{From: h})
		if err != nil {
			return err
		}
		return commits.ForEach(func(c *object.Commit) error {
			if seen[c.Hash] {
				return nil
			}
			seen[c.Hash] = true
			walkTree(c.TreeHash)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(gittest.Git(t, remoteDir, nil, "rev-list", "--objects", "--all"), "\n")
	if len(seen) != want {
		t.Errorf("go-git read %d objects, the remote has %d", len(seen), want)
	}
}

func syncMirror(t *testing.T, m *Mirrors, url string) {
	t.Helper()
	if _, err := m.Sync(context.Background(), url); err != nil {
		t.Fatal(err)
	}
}

// A first sync and incremental syncs write packs indexed exactly as git
// indexes them; go-git never asks for a thin pack, so the packs of
// incremental fetches are complete (no base had to be appended).
func TestSyncPacksMatchGit(t *testing.T) {
	fg, m := setup(t)
	pack := recordPacks(t)
	generated(t, fg, "acme", "big", repogen.Spec{Commits: 150, FilesPerCommit: 4, Refs: 12, BlobSize: 3000, Binary: 3, Seed: 11})
	url := fg.CloneURL("acme", "big")
	remoteDir, _ := fg.GitDir("acme", "big")
	syncMirror(t, m, url)
	if ix := pack(); len(ix) != 1 || ix[0].Objects() < 1000 {
		t.Fatalf("first sync wrote %d packs", len(ix))
	}
	checkMirror(t, m.Path(url), remoteDir)

	// New versions of existing files: deltas on objects the mirror has.
	for i := 0; i < 3; i++ {
		content := strings.Repeat(fmt.Sprintf("line of a long file, version %d\n", i), 400)
		if _, err := fg.Commit("acme", "big", "main", map[string]string{"long.txt": content, fmt.Sprintf("n%d.txt", i): "x\n"}, "edit"); err != nil {
			t.Fatal(err)
		}
		syncMirror(t, m, url)
		ix := pack()
		if len(ix) != 1 {
			t.Fatalf("incremental sync wrote %d packs", len(ix))
		}
		if ix[0].ThinBases != 0 {
			t.Errorf("incremental sync received a thin pack (%d bases appended)", ix[0].ThinBases)
		}
	}
	checkMirror(t, m.Path(url), remoteDir)
	// Nothing new: no pack.
	syncMirror(t, m, url)
	if ix := pack(); len(ix) != 0 {
		t.Errorf("a sync without changes wrote %d packs", len(ix))
	}
}

// Should go-git ask for thin packs, the packs would be completed with the
// bases from the mirror: allowing the capability makes the server send them.
func TestSyncCompletesThinPacks(t *testing.T) {
	old := transport.UnsupportedCapabilities
	transport.UnsupportedCapabilities = slices.DeleteFunc(slices.Clone(old), func(c capability.Capability) bool {
		return c == capability.ThinPack
	})
	t.Cleanup(func() { transport.UnsupportedCapabilities = old })

	fg, m := setup(t)
	pack := recordPacks(t)
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := 0; i < 300; i++ {
		lines = append(lines, fmt.Sprintf("line %d of a file that changes a little at a time", i))
	}
	content := func() map[string]string {
		return map[string]string{"a.txt": strings.Join(lines, "\n"), "b.txt": strings.Join(lines[100:], "\n")}
	}
	if _, err := fg.Commit("acme", "app", "main", content(), "first"); err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "app")
	remoteDir, _ := fg.GitDir("acme", "app")
	syncMirror(t, m, url)
	pack()
	thin := 0
	for i := 0; i < 3; i++ {
		lines[10*i+5] = fmt.Sprintf("changed in version %d", i)
		if _, err := fg.Commit("acme", "app", "main", content(), "edit"); err != nil {
			t.Fatal(err)
		}
		syncMirror(t, m, url)
		for _, ix := range pack() {
			thin += ix.ThinBases
		}
	}
	if thin == 0 {
		t.Fatal("no thin pack received: the test proves nothing")
	}
	checkMirror(t, m.Path(url), remoteDir)
}

// A corrupt pack is an error classified as a corrupt pack (retryable, and a
// reason to rebuild the mirror), and leaves nothing behind; an empty one is
// no error.
func TestPackWriterCorruptAndEmpty(t *testing.T) {
	fg, _ := setup(t)
	generated(t, fg, "acme", "app", repogen.Spec{Commits: 20, FilesPerCommit: 3, Refs: 3, Seed: 1})
	remoteDir, _ := fg.GitDir("acme", "app")
	good := []byte(gittest.Git(t, remoteDir, nil, "pack-objects", "--all", "--stdout", "-q", "--delta-base-offset"))

	dir := filepath.Join(t.TempDir(), "m.git")
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st, release := withPackWriter(repo.Storer, dir)
	defer release()
	s := st.(*packStorage)
	write := func(data []byte) error {
		err := packfile.WritePackfileToObjectStorage(s, bytes.NewReader(data))
		if left, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*")); len(left) > 0 && err != nil {
			t.Errorf("files left after an error: %v", left)
		}
		return err
	}
	for _, bad := range [][]byte{good[:len(good)/2], append(slices.Clone(good[:len(good)-1]), good[len(good)-1]^1)} {
		err := write(bad)
		if !errors.Is(err, packfile.ErrMalformedPackFile) || !errors.Is(err, gitread.ErrCorrupt) {
			t.Fatalf("corrupt pack: %v", err)
		}
		if c := errclass.Classify(err); c.Reason != "corrupt pack" || c.Class != errclass.Retryable {
			t.Fatalf("corrupt pack classified %+v", c)
		}
	}
	if err := write(nil); !errors.Is(err, packfile.ErrEmptyPackfile) {
		t.Fatalf("empty stream: %v", err)
	}
	if err := write(good); err != nil {
		t.Fatal(err)
	}
	// The storage sees the new pack at once.
	heads := gittest.Git(t, remoteDir, nil, "rev-parse", "main")
	if _, err := repo.CommitObject(plumbing.NewHash(strings.TrimSpace(heads))); err != nil {
		t.Fatalf("new pack not visible: %v", err)
	}
	if _, err := object.GetCommit(s, plumbing.NewHash(strings.TrimSpace(heads))); err != nil {
		t.Fatalf("new pack not visible to the pack storage's own lookups: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*")); len(left) != 2 {
		t.Fatalf("files after a good pack: %v", left)
	}
}
