package gitread

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
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

// gitDir is where a repository's files are: path itself (bare) or its
// .git directory, which must be a directory, not a link to one.
func gitDir(path string) string {
	if fi, err := os.Lstat(filepath.Join(path, ".git")); err == nil && fi.IsDir() {
		return filepath.Join(path, ".git")
	}
	return path
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
