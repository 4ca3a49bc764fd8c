package gitread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
)

// A repository's files are read within it, whoever wrote them: a local
// repository to scan may be anyone's. gitread opens them through an
// os.Root on the repository's directory, which follows a symbolic link
// only as long as it stays inside (a ref linked to /dev/zero or another
// repository's files is refused), with O_NONBLOCK so that opening a FIFO
// does not block, and reads regular files only (a FIFO would block the
// read for ever, while the scan's lease keeper heartbeats; a device would
// feed it for ever). go-git, for what gitread leaves to it, gets the same
// through repoFS.

// gitDir is where a repository's files are: path itself (bare), its .git
// directory (not a link to one), or, when .git is a file, the repository
// that file names (see linkedGitDir).
// GitDir is the directory holding the repository at path: path itself
// (bare), path/.git, or the repository a .git file names (see
// linkedGitDir). It is what Open reads.
func GitDir(path string) (string, error) { return gitDir(path) }

func gitDir(path string) (string, error) {
	fi, err := os.Lstat(filepath.Join(path, ".git"))
	switch {
	case err != nil:
		return path, nil
	case fi.IsDir():
		return filepath.Join(path, ".git"), nil
	case fi.Mode().IsRegular():
		return linkedGitDir(path)
	}
	return path, nil // a link: not followed, path opens as it is or not at all
}

// maxGitFileBytes bounds a .git or commondir file: a path and a newline.
const maxGitFileBytes = 4 << 10

// linkedGitDir resolves the .git file of a linked work tree (`git worktree
// add`) or a submodule to the repository whose objects and refs it uses.
// This is the one place gitread leaves a repository's directory on
// purpose, and it does it once, deliberately:
//
//   - .git is a regular file in path ("gitdir: DIR"); DIR may be anywhere,
//     as git allows (relative to path, or absolute);
//   - a work tree's DIR holds a commondir file naming its repository
//     (relative to DIR); DIR must then be that repository's
//     worktrees/<name>, where git puts it, so a .git file cannot borrow
//     an unrelated directory's commondir;
//   - the repository so found (the common directory, or DIR itself for a
//     submodule or a separated git directory) is then read like any other:
//     within it, through an os.Root, nothing further followed out of it.
//
// What is scanned is what that repository holds (its branches and tags),
// which is what git in the work tree sees besides the work tree's own
// HEAD.
func linkedGitDir(path string) (string, error) {
	line, err := readSmallFile(path, ".git")
	if err != nil {
		return "", err
	}
	dir, ok := strings.CutPrefix(line, "gitdir:")
	if dir = strings.TrimSpace(dir); !ok || dir == "" {
		return "", fmt.Errorf("%s/.git is a file but not a git link (\"gitdir: …\"): %w", path, git.ErrRepositoryNotExists)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(path, dir)
	}
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s/.git names %s, which is not a directory: %w", path, dir, git.ErrRepositoryNotExists)
	}
	common, err := readSmallFile(dir, "commondir")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dir, nil // a submodule or a separated git directory: DIR is the repository
	case err != nil:
		return "", err
	}
	common = strings.TrimSpace(common)
	if !filepath.IsAbs(common) {
		common = filepath.Join(dir, common)
	}
	common = filepath.Clean(common)
	if filepath.Dir(dir) != filepath.Join(common, "worktrees") {
		return "", fmt.Errorf("%s/.git names %s, which is not one of the work trees of %s: %w", path, dir, common, ErrUnsafe)
	}
	return common, nil
}

// readSmallFile reads name in dir, a regular file within it, as text: at
// most maxGitFileBytes, its first line.
func readSmallFile(dir, name string) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close() //nolint:errcheck // read only: nothing to lose
	f, _, err := openFile(root, name)
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // read only
	b, err := io.ReadAll(io.LimitReader(f, maxGitFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxGitFileBytes {
		return "", fmt.Errorf("%s/%s: longer than a git link: %w", dir, name, git.ErrRepositoryNotExists)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return first, nil
}

// openFile opens name (slash-separated, relative to root) for reading: a
// regular file in root. A file reached through a link out of root, or no
// regular file, is an error wrapping ErrUnsafe; a missing one wraps
// fs.ErrNotExist.
func openFile(root *os.Root, name string) (*os.File, os.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, nil, unsafeOpen(name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %s: %w", name, fileKind(fi.Mode()), ErrUnsafe)
	}
	return f, fi, nil
}

// unsafeOpen marks an open that failed because the path leads out of the
// root (os.Root says "path escapes from parent", with no error value of
// its own) as ErrUnsafe.
func unsafeOpen(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		return fmt.Errorf("%s: a symbolic link out of the repository: %w", name, ErrUnsafe)
	}
	return err
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file"
}

// repoFS is the file system go-git reads a repository through (see Open):
// bound to the repository's directory (billy's BoundOS: links are
// resolved inside it), opening files with O_NONBLOCK and refusing any
// that is neither a regular file nor a directory.
type repoFS struct{ billy.Filesystem }

func newRepoFS(dir string) billy.Filesystem {
	return repoFS{osfs.New(dir, osfs.WithBoundOS())}
}

func (r repoFS) Open(name string) (billy.File, error) { return r.OpenFile(name, os.O_RDONLY, 0) }

func (r repoFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	f, err := r.Filesystem.OpenFile(name, flag|oNonblock, perm)
	if err != nil {
		return nil, err
	}
	if st, ok := f.(interface{ Stat() (os.FileInfo, error) }); ok {
		fi, err := st.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if m := fi.Mode(); !m.IsRegular() && !m.IsDir() {
			f.Close()
			return nil, fmt.Errorf("%s: %s: %w", name, fileKind(m), ErrUnsafe)
		}
	}
	return f, nil
}

func (r repoFS) Chroot(path string) (billy.Filesystem, error) {
	fs, err := r.Filesystem.Chroot(path)
	if err != nil {
		return nil, err
	}
	return repoFS{fs}, nil
}
