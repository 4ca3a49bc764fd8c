package gitread

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Git file modes, by their type bits (mode & 0170000).
const (
	modeTypeMask = 0o170000
	modeDir      = 0o040000
	modeRegular  = 0o100000
	modeSymlink  = 0o120000
	modeGitlink  = 0o160000
)

// readRaw reads the content of object h of type t into buf (grown as
// needed) and returns it.
func readRaw(s storer.EncodedObjectStorer, t plumbing.ObjectType, h plumbing.Hash, buf []byte) ([]byte, error) {
	obj, err := s.EncodedObject(t, h)
	if err != nil {
		return buf, DataError(err)
	}
	return readObject(obj, buf)
}

func readObject(obj plumbing.EncodedObject, buf []byte) ([]byte, error) {
	size := obj.Size()
	if size < 0 {
		return buf, fmt.Errorf("%w: object %s: negative size", ErrCorrupt, obj.Hash())
	}
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	r, err := obj.Reader()
	if err != nil {
		return buf[:0], DataError(err)
	}
	_, err = io.ReadFull(r, buf)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return buf[:0], fmt.Errorf("read object %s: %w", obj.Hash(), DataError(err))
	}
	return buf, nil
}

// commitInfo is what the walk needs of a commit.
type commitInfo struct {
	tree    plumbing.Hash
	parents []plumbing.Hash
	when    int64 // committer time, seconds since the epoch
}

var errBadCommit = fmt.Errorf("%w: malformed commit", ErrCorrupt)

// parseCommit reads the header of a raw commit: its tree, parents and
// committer time. Continuation lines (multi-line headers such as gpgsig
// start with a space) and unknown headers are skipped.
func parseCommit(raw []byte, ci *commitInfo) error {
	ci.parents = ci.parents[:0]
	haveTree := false
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 {
			break // end of the header, the message follows
		}
		switch {
		case bytes.HasPrefix(line, []byte("tree ")):
			h, ok := parseHex(line[5:])
			if !ok {
				return errBadCommit
			}
			ci.tree, haveTree = h, true
		case bytes.HasPrefix(line, []byte("parent ")):
			h, ok := parseHex(line[7:])
			if !ok {
				return errBadCommit
			}
			ci.parents = append(ci.parents, h)
		case bytes.HasPrefix(line, []byte("committer ")):
			// "committer Name <email> 1700000000 +0000"
			if i := bytes.LastIndexByte(line, '>'); i >= 0 {
				f := bytes.Fields(line[i+1:])
				if len(f) > 0 {
					if t, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
						ci.when = t
					}
				}
			}
		}
	}
	if !haveTree {
		return errBadCommit
	}
	return nil
}

func parseHex(b []byte) (plumbing.Hash, bool) {
	var h plumbing.Hash
	if len(b) != 2*len(h) {
		return h, false
	}
	for i := range h {
		hi, ok1 := unhex(b[2*i])
		lo, ok2 := unhex(b[2*i+1])
		if !ok1 || !ok2 {
			return h, false
		}
		h[i] = hi<<4 | lo
	}
	return h, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// tree is a parsed tree object. Entries point into raw, so parsing costs one
// allocation for the entry table and none per entry.
type tree struct {
	raw     []byte
	entries []treeEntry
}

// treeEntry is one entry of a tree: the name is raw[off:off+nlen], the hash
// the 20 bytes after the NUL that ends the name.
type treeEntry struct {
	off  uint32
	nlen uint32
	mode uint32
}

func (t *tree) name(e *treeEntry) []byte { return t.raw[e.off : e.off+e.nlen] }

func (t *tree) hash(e *treeEntry) (h plumbing.Hash) {
	p := e.off + e.nlen + 1
	copy(h[:], t.raw[p:p+uint32(len(h))])
	return h
}

func (t *tree) size() int { return len(t.raw) + cap(t.entries)*12 + 64 }

var errBadTree = fmt.Errorf("%w: malformed tree", ErrCorrupt)

// parseTree parses raw ("<octal mode> <name>\x00<20-byte hash>" repeated).
func parseTree(raw []byte) (*tree, error) {
	// Count entries first so the table is allocated once: one NUL per entry.
	n := bytes.Count(raw, []byte{0})
	t := &tree{raw: raw, entries: make([]treeEntry, 0, n)}
	const hashLen = len(plumbing.ZeroHash)
	for p := 0; p < len(raw); {
		var mode uint32
		q := p
		for q < len(raw) && raw[q] != ' ' {
			c := raw[q]
			if c < '0' || c > '7' {
				return nil, errBadTree
			}
			mode = mode<<3 | uint32(c-'0')
			q++
		}
		if q == p || q >= len(raw) {
			return nil, errBadTree
		}
		q++ // space
		nul := bytes.IndexByte(raw[q:], 0)
		if nul <= 0 || q+nul+1+hashLen > len(raw) {
			return nil, errBadTree
		}
		t.entries = append(t.entries, treeEntry{off: uint32(q), nlen: uint32(nul), mode: mode})
		p = q + nul + 1 + hashLen
	}
	return t, nil
}

// compareEntries orders names as Git sorts tree entries: bytewise, with a
// directory's name compared as if it ended in '/'.
func compareEntries(a []byte, aDir bool, b []byte, bDir bool) int {
	n := min(len(a), len(b))
	if c := bytes.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	var ca, cb byte
	if len(a) > n {
		ca = a[n]
	} else if aDir {
		ca = '/'
	}
	if len(b) > n {
		cb = b[n]
	} else if bDir {
		cb = '/'
	}
	return int(ca) - int(cb)
}

// treeCache is an LRU of parsed trees bounded by their size in bytes.
type treeCache struct {
	max, used int
	m         map[plumbing.Hash]*treeNode
	head      treeNode // sentinel: head.next is the most recently used
}

type treeNode struct {
	h          plumbing.Hash
	t          *tree
	prev, next *treeNode
}

func newTreeCache(max int) *treeCache {
	c := &treeCache{max: max, m: make(map[plumbing.Hash]*treeNode)}
	c.head.next, c.head.prev = &c.head, &c.head
	return c
}

func (c *treeCache) get(h plumbing.Hash) *tree {
	n := c.m[h]
	if n == nil {
		return nil
	}
	c.unlink(n)
	c.pushFront(n)
	return n.t
}

func (c *treeCache) put(h plumbing.Hash, t *tree) {
	if c.max <= 0 || t.size() > c.max/4 {
		return
	}
	if _, ok := c.m[h]; ok {
		return
	}
	n := &treeNode{h: h, t: t}
	c.m[h] = n
	c.pushFront(n)
	c.used += t.size()
	for c.used > c.max {
		old := c.head.prev
		c.unlink(old)
		delete(c.m, old.h)
		c.used -= old.t.size()
	}
}

func (c *treeCache) unlink(n *treeNode) {
	n.prev.next = n.next
	n.next.prev = n.prev
}

func (c *treeCache) pushFront(n *treeNode) {
	n.prev = &c.head
	n.next = c.head.next
	c.head.next.prev = n
	c.head.next = n
}
