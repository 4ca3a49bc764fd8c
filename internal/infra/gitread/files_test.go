package gitread

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
)

// unsafeRepo is a bare repository with one good branch, whose other files
// are what a hostile local repository holds: refs that are links out of it
// (to /dev/zero, which a read would consume for ever, and to another
// directory's file), a link to a FIFO inside it (whose read would block for
// ever), a FIFO ref and a ref file larger than any git writes.
func unsafeRepo(t *testing.T) (string, plumbing.Hash) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo.git")
	c := gittest.DeepTree(1)
	c.Write(t, dir)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte(c.Commit.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	heads := filepath.Join(dir, "refs", "heads")
	for name, target := range map[string]string{"zero": "/dev/zero", "outside": outside, "via-fifo": "../../fifo"} {
		if err := os.Symlink(target, filepath.Join(heads, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(dir, "fifo"), filepath.Join(heads, "fifo")} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := append([]byte(c.Commit.String()+"\n"), make([]byte, 1<<20)...)
	if err := os.WriteFile(filepath.Join(heads, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, c.Commit
}

// Refs are read within the repository, regular files only: the hostile
// ones are skipped and counted, the good one read, and nothing blocks.
func TestReadRefsUnsafe(t *testing.T) {
	dir, tip := unsafeRepo(t)
	refs, err := ReadRefs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs.Refs) != 1 || refs.Refs[0].Name != "refs/heads/main" || refs.Refs[0].Hash != tip {
		t.Errorf("refs %v", refs.Refs)
	}
	if refs.Ignored[IgnoredUnsafeRef] != 4 || refs.Ignored[IgnoredMalformedRef] != 1 {
		t.Errorf("ignored %v, want 4 unsafe, 1 malformed", refs.Ignored)
	}

	// refs/heads linked to a directory out of the repository, holding a
	// ref: not read, ignored and counted.
	heads := filepath.Join(dir, "refs", "heads")
	if err := os.Rename(heads, filepath.Join(dir, "heads.away")); err != nil {
		t.Fatal(err)
	}
	away := t.TempDir()
	if err := os.WriteFile(filepath.Join(away, "main"), []byte(tip.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(away, heads); err != nil {
		t.Fatal(err)
	}
	if refs, err := ReadRefs(dir); err != nil || len(refs.Refs) != 0 || refs.Ignored[IgnoredUnsafeRef] != 1 {
		t.Errorf("refs/heads linked out: %+v, %v; want nothing read, 1 ignored", refs, err)
	}

	// refs/ itself linked out: refused.
	refsDir := filepath.Join(dir, "refs")
	if err := os.Rename(refsDir, filepath.Join(dir, "refs.away")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), refsDir); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRefs(dir); !errors.Is(err, ErrUnsafe) {
		t.Errorf("refs/ linked out: %v, want ErrUnsafe", err)
	}

	// A packed-refs file that is a FIFO, or a link out: refused, at once.
	for _, target := range []string{"", "/dev/zero"} {
		p := filepath.Join(dir, "packed-refs")
		os.Remove(p)
		if target == "" {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadRefs(dir); !errors.Is(err, ErrUnsafe) {
			t.Errorf("packed-refs %q: %v, want ErrUnsafe", target, err)
		}
	}
}

// Packs, their indexes and loose objects are read within the repository:
// a pack that is a link out of it or a FIFO is refused, and the walk
// through go-git (Open) of a repository whose HEAD is a FIFO fails at once.
func TestPacksUnsafe(t *testing.T) {
	dir, _ := unsafeRepo(t)
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs %v", packs)
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.pack")
	if err := os.Rename(packs[0], elsewhere); err != nil {
		t.Fatal(err)
	}
	for name, mk := range map[string]func() error{
		"link out": func() error { return os.Symlink(elsewhere, packs[0]) },
		"FIFO":     func() error { return syscall.Mkfifo(packs[0], 0o644) },
	} {
		os.Remove(packs[0])
		if err := mk(); err != nil {
			t.Fatal(err)
		}
		if ps, err := OpenPacks(dir); !errors.Is(err, ErrUnsafe) {
			if ps != nil {
				ps.Close()
			}
			t.Errorf("%s: %v, want ErrUnsafe", name, err)
		}
	}

	// A loose object that is a FIFO: not read.
	os.Remove(packs[0])
	if err := os.Rename(elsewhere, packs[0]); err != nil {
		t.Fatal(err)
	}
	h := gittest.Hash("blob", []byte("loose\n"))
	loose := filepath.Join(dir, "objects", h.String()[:2], h.String()[2:])
	if err := os.MkdirAll(filepath.Dir(loose), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	ps := openPacks(t, dir)
	if _, _, err := ps.NewReader().Read(h, 0, nil); !errors.Is(err, ErrUnsafe) {
		t.Errorf("loose FIFO: %v, want ErrUnsafe", err)
	}

	// go-git reads HEAD to open the repository.
	head := filepath.Join(dir, "HEAD")
	os.Remove(head)
	if err := syscall.Mkfifo(head, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, 0); err == nil {
		t.Error("Open with a FIFO for HEAD: no error")
	}
	os.Remove(head)
	if err := os.Symlink("/dev/zero", head); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, 0); err == nil {
		t.Error("Open with HEAD linked to /dev/zero: no error")
	}
}
