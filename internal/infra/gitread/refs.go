package gitread

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Reasons a ref is ignored by ReadRefs (RefList.Ignored counts them).
const (
	// IgnoredEmptyRef: an empty file under refs/ (a refs/heads/x left by a
	// crash mid-write). Git: "ignoring broken ref".
	IgnoredEmptyRef = "empty ref file"
	// IgnoredMalformedRef: a ref file holding neither an object id nor
	// "ref: <name>", or the null id. Git: "ignoring broken ref".
	IgnoredMalformedRef = "malformed ref file"
	// IgnoredBadName: a file under refs/ whose path is no valid ref name
	// (refs/.gitkeep, a stale x.lock): git skips these silently.
	IgnoredBadName = "invalid ref name"
	// IgnoredDanglingSymref: a symbolic ref whose target does not exist
	// (or a cycle of them). Git: "ignoring dangling symref".
	IgnoredDanglingSymref = "dangling symbolic ref"
	// IgnoredPackedRefsLine: a line of packed-refs that is not a ref, a
	// peeled line after a ref, a comment or blank. Git refuses the whole
	// file; losing one ref is better than losing them all.
	IgnoredPackedRefsLine = "malformed packed-refs line"
	// IgnoredUnsafeRef: a ref that is no regular file in the repository:
	// a symbolic link out of it (to /dev/zero, another repository's
	// files), a FIFO, a device. Git would read through it; gitread does
	// not (see openFile).
	IgnoredUnsafeRef = "unsafe ref file"
)

// Ref is a ref naming an object directly.
type Ref struct {
	Name string
	Hash plumbing.Hash
}

// RefList is a repository's refs as ReadRefs found them.
type RefList struct {
	// Refs are the refs under refs/ that name an object id, sorted by
	// name (a loose ref wins over a packed one of the same name). Symbolic
	// refs are not listed: they name refs that are.
	Refs []Ref
	// Ignored counts what was skipped, by reason (the Ignored* constants).
	Ignored map[string]int
	// symbolic refs by name → target name, for Resolve.
	symbolic map[string]string
}

// maxSymrefDepth is how many symbolic refs Resolve follows, as git's
// SYMREF_MAXDEPTH.
const maxSymrefDepth = 5

// Resolve returns the object a ref names, following symbolic refs; false
// when there is no such ref or it dangles.
func (l *RefList) Resolve(name string) (plumbing.Hash, bool) {
	for range maxSymrefDepth + 1 {
		if target, ok := l.symbolic[name]; ok {
			name = target
			continue
		}
		i, found := slices.BinarySearchFunc(l.Refs, name, func(r Ref, n string) int { return strings.Compare(r.Name, n) })
		if !found {
			return plumbing.ZeroHash, false
		}
		return l.Refs[i].Hash, true
	}
	return plumbing.ZeroHash, false
}

// ReadRefs reads the refs of the repository at path (a bare repository, or
// a work tree with a .git directory) the way git does, but never fails on a
// broken ref: where go-git gives up on the whole repository ("ref file is
// empty", "malformed packed-ref"), ReadRefs skips the ref, counts it in
// RefList.Ignored, and reads the rest. Only the file system failing is an
// error (a directory that cannot be read, permission denied), and a
// packed-refs file over MaxRefsBytes (ErrLimit) or unsafe (ErrUnsafe).
// Refs are read within the repository (see openFile): a ref that is a
// link out of it, a FIFO or a device is skipped and counted
// (IgnoredUnsafeRef), and a ref file larger than any git writes is
// malformed.
func ReadRefs(path string) (*RefList, error) {
	dir, err := gitDir(path)
	if err != nil {
		return nil, fmt.Errorf("read refs: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("read refs: %w", err)
	}
	defer root.Close() //nolint:errcheck // read only: nothing to lose
	l := &RefList{Ignored: map[string]int{}, symbolic: map[string]string{}}
	refs := map[string]plumbing.Hash{}
	if err := readPackedRefs(root, refs, l.Ignored); err != nil {
		return nil, err
	}
	buf := make([]byte, maxRefFileBytes+1)
	err = fs.WalkDir(root.FS(), "refs", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a ref deleted while we walk, or no refs/ at all
			}
			return unsafeOpen(name, err) // refs/ or a directory of it linked out
		}
		if d.IsDir() {
			return nil
		}
		if !ValidRefName(name) {
			l.Ignored[IgnoredBadName]++
			return nil
		}
		data, err := readRefFile(root, name, buf)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case errors.Is(err, ErrUnsafe):
			l.Ignored[IgnoredUnsafeRef]++
			return nil
		case err != nil:
			return fmt.Errorf("read refs: %w", err)
		}
		h, target, reason := parseRefFile(data)
		switch {
		case reason != "":
			l.Ignored[reason]++
		case target != "":
			l.symbolic[name] = target
			delete(refs, name)
		default:
			refs[name] = h
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read refs: %w", err)
	}
	l.Refs = make([]Ref, 0, len(refs))
	for name, h := range refs {
		if _, sym := l.symbolic[name]; !sym {
			l.Refs = append(l.Refs, Ref{Name: name, Hash: h})
		}
	}
	slices.SortFunc(l.Refs, func(a, b Ref) int { return strings.Compare(a.Name, b.Name) })
	for name := range l.symbolic {
		if _, ok := l.Resolve(name); !ok {
			l.Ignored[IgnoredDanglingSymref]++
			delete(l.symbolic, name)
		}
	}
	return l, nil
}

// readRefFile reads a loose ref into buf: at most maxRefFileBytes (a
// larger file is no ref git wrote: what is read of it is malformed).
func readRefFile(root *os.Root, name string, buf []byte) ([]byte, error) {
	f, _, err := openFile(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	return buf[:n], err
}

// parseRefFile parses a loose ref: an object id or "ref: <name>", with
// surrounding white space. A reason says why it is no ref.
func parseRefFile(data []byte) (h plumbing.Hash, target, reason string) {
	s := bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return h, "", IgnoredEmptyRef
	case len(data) > maxRefFileBytes:
		return h, "", IgnoredMalformedRef
	case bytes.HasPrefix(s, []byte("ref:")):
		target = string(bytes.TrimSpace(s[len("ref:"):]))
		if !ValidRefName(target) {
			return h, "", IgnoredMalformedRef
		}
		return h, target, ""
	}
	h, ok := parseHex(s)
	if !ok || len(s) != 2*hashSize || h.IsZero() {
		return h, "", IgnoredMalformedRef
	}
	return h, "", ""
}

// readPackedRefs adds the refs of the packed-refs file in root to refs.
func readPackedRefs(root *os.Root, refs map[string]plumbing.Hash, ignored map[string]int) error {
	f, fi, err := openFile(root, "packed-refs")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read packed-refs: %w", err)
	}
	defer f.Close()
	if fi.Size() > MaxRefsBytes {
		return &LimitError{What: "refs size", Detail: fmt.Sprintf("a packed-refs file of %d bytes (at most %d are read)", fi.Size(), MaxRefsBytes)}
	}
	sc := bufio.NewScanner(io.LimitReader(f, MaxRefsBytes))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	afterRef := false
	for sc.Scan() {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		ok := true
		switch {
		case len(line) == 0, line[0] == '#':
		case line[0] == '^':
			// The peeled value of the ref above; the walk peels itself.
			_, valid := parseHex(line[1:])
			ok = afterRef && valid && len(line) == 1+2*hashSize
		default:
			ok = len(line) > 2*hashSize+1 && line[2*hashSize] == ' '
			if ok {
				h, valid := parseHex(line[:2*hashSize])
				name := string(line[2*hashSize+1:])
				ok = valid && !h.IsZero() && ValidRefName(name)
				if ok {
					refs[name] = h
				}
			}
			afterRef = ok
			if !ok {
				ignored[IgnoredPackedRefsLine]++
			}
			continue
		}
		afterRef = false
		if !ok {
			ignored[IgnoredPackedRefsLine]++
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			ignored[IgnoredPackedRefsLine]++
			return nil // the rest of the file is lost, the refs read so far are not
		}
		return fmt.Errorf("read packed-refs: %w", err)
	}
	return nil
}

// ValidRefName reports whether name is a full ref name git accepts
// (git check-ref-format, for names under refs/): no empty component and
// none starting with '.' or ending with ".lock", no "..", "@{", control
// characters, space or any of ~^:?*[\, not ending with '/' or '.'.
func ValidRefName(name string) bool {
	if !strings.HasPrefix(name, "refs/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") {
		return false
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return false
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if comp == "" || comp[0] == '.' || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}
