package gittest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// A Crafted repository is one pack built entry by entry, whatever git
// would make of it: one commit, on refs/heads/main, whose tree holds
// bomb.bin. The hostile repositories of issue 20 are crafted: delta bombs
// (packs of a few hundred bytes that describe objects of many GiB, or a
// chain that never ends) and trees nested deeper than anyone reads.
// Objects the pack cannot name honestly (a bomb's targets, whose content
// nobody computes) get made-up names in the index: readers do not hash
// what they read, and the tree names the top one.
type Crafted struct {
	Name   string
	Pack   *Pack
	Commit plumbing.Hash
}

// Bytes is the pack, as a server sends it.
func (c *Crafted) Bytes() []byte { return c.Pack.Bytes() }

// Write makes dir a bare repository holding the pack (with its index) and
// refs/heads/main at the commit.
func (c *Crafted) Write(t testing.TB, dir string) {
	t.Helper()
	if err := c.WriteRepo(dir); err != nil {
		t.Fatal(err)
	}
}

// WriteRepo is Write, returning its error.
func (c *Crafted) WriteRepo(dir string) error {
	for _, d := range []string{"refs/heads", "refs/tags", "objects/info"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"HEAD":            "ref: refs/heads/main\n",
		"config":          "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
		"refs/heads/main": c.Commit.String() + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// Named by its checksum, as git names packs (go-git finds them so).
	pack := c.Pack.Bytes()
	return c.Pack.WriteFiles(dir, fmt.Sprintf("%x", pack[len(pack)-20:]), false)
}

// ZeroBytes is the size of the blob of zeros the delta bombs copy from
// (its zlib data is about 100 bytes).
const ZeroBytes = 1 << 16

// NestedDeltas is the bomb of issue 20: 64 KiB of zeros and a chain of
// deltas on it whose targets have the given sizes (multiples of 64 KiB).
// Each copies the start of its base over and over: a target of n bytes
// takes n/2^16 bytes of instructions on the 64 KiB blob and about n/2^23
// on a base of 16 MiB or more, which zlib deflates to almost nothing. With
// sizes 1 GiB and 64 GiB the pack is about 300 bytes.
func NestedDeltas(sizes ...int64) *Crafted {
	p := NewPack()
	top := madeUp("bomb top")
	c := wrap(p, "nested-deltas", top)
	base := int64(ZeroBytes)
	_, off := p.Blob(make([]byte, ZeroBytes))
	for i, size := range sizes {
		h := madeUp(fmt.Sprintf("bomb level %d", i))
		if i == len(sizes)-1 {
			h = top
		}
		off = p.OfsDelta(h, off, Repeat(base, size))
		base = size
	}
	return c
}

// Repeat is a delta from a base of src bytes to a target of tgt bytes that
// copies the base's start over and over, in copies of at most 0xff0000
// bytes (two bytes of instructions each).
func Repeat(src, tgt int64) Delta {
	d := NewDelta(int(src), int(tgt))
	chunk := min(src, 0xff0000)
	for left := tgt; left > 0; left -= min(chunk, left) {
		d = d.Copy(0, int(min(chunk, left)))
	}
	return d
}

// HugeDeclaredSize is a delta on 64 KiB of zeros that declares a target
// of 2^40 bytes (its instructions make 16).
func HugeDeclaredSize() *Crafted {
	p := NewPack()
	top := madeUp("declared")
	c := wrap(p, "huge-declared-size", top)
	_, off := p.Blob(make([]byte, ZeroBytes))
	p.OfsDelta(top, off, NewDelta(ZeroBytes, 1<<40).Copy(0, 16))
	return c
}

// DeltaCycle is two REF_DELTAs, each naming the other as its base: a
// chain that never ends.
func DeltaCycle() *Crafted {
	p := NewPack()
	a, b := madeUp("cycle a"), madeUp("cycle b")
	c := wrap(p, "delta-cycle", a)
	p.RefDelta(a, b, NewDelta(16, 16).Copy(0, 16))
	p.RefDelta(b, a, NewDelta(16, 16).Copy(0, 16))
	return c
}

// DeepTree is a tree nested depth levels deep (d/d/d/…/bomb.bin), which a
// walk recursing once per level would follow to Go's fatal stack limit
// were it deep enough. Its trees are real (their names are their hashes).
func DeepTree(depth int) *Crafted {
	p := NewPack()
	blob, _ := p.Blob([]byte("deep down\n"))
	h, name, mode := blob, "bomb.bin", "100644"
	for range depth {
		h = tree(p, mode, name, h)
		name, mode = "d", "40000"
	}
	c := &Crafted{Name: "deep-tree", Pack: p}
	c.Commit = commit(p, tree(p, mode, name, h))
	return c
}

// OneOfEach is one commit whose root tree holds one crafted object of
// each kind — the nested delta bomb of 1 GiB and 64 GiB (bomb.bin), a delta
// declaring 2^40 bytes (declared.bin), a delta cycle (cycle.bin), a tree
// nested depth levels deep (deep/d/…/bomb.bin) — beside the given files
// (top-level name → content): the repository of issue 31, in which whoever
// can push one commit tries to hide every other file from a scan.
func OneOfEach(depth int, files map[string]string) *Crafted {
	p := NewPack()
	_, zeros := p.Blob(make([]byte, ZeroBytes))
	type entry struct {
		mode, name string
		h          plumbing.Hash
	}
	var entries []entry
	// The nested bomb.
	off, base := zeros, int64(ZeroBytes)
	for i, size := range []int64{1 << 30, 64 << 30} {
		h := madeUp(fmt.Sprintf("one of each: bomb level %d", i))
		off = p.OfsDelta(h, off, Repeat(base, size))
		base = size
		if i == 1 {
			entries = append(entries, entry{"100644", "bomb.bin", h})
		}
	}
	declared := madeUp("one of each: declared")
	p.OfsDelta(declared, zeros, NewDelta(ZeroBytes, 1<<40).Copy(0, 16))
	entries = append(entries, entry{"100644", "declared.bin", declared})
	a, b := madeUp("one of each: cycle a"), madeUp("one of each: cycle b")
	p.RefDelta(a, b, NewDelta(16, 16).Copy(0, 16))
	p.RefDelta(b, a, NewDelta(16, 16).Copy(0, 16))
	entries = append(entries, entry{"100644", "cycle.bin", a})
	deep, _ := p.Blob([]byte("deep down\n"))
	name, mode := "bomb.bin", "100644"
	for range depth - 1 {
		deep = tree(p, mode, name, deep)
		name, mode = "d", "40000"
	}
	entries = append(entries, entry{"40000", "deep", tree(p, mode, name, deep)})
	for name, content := range files {
		h, _ := p.Blob([]byte(content))
		entries = append(entries, entry{"100644", name, h})
	}
	// Git's order: a directory's name sorts as if it ended in "/".
	key := func(e entry) string {
		if e.mode == "40000" {
			return e.name + "/"
		}
		return e.name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	var raw bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&raw, "%s %s\x00", e.mode, e.name)
		raw.Write(e.h[:])
	}
	root := Hash("tree", raw.Bytes())
	p.Entry(root, Tree, uint64(raw.Len()), nil, raw.Bytes())
	return &Crafted{Name: "one-of-each", Pack: p, Commit: commit(p, root)}
}

// wrap starts a crafted repository whose commit's tree holds bomb.bin
// naming top: the commit and tree come first in the pack, as whole
// objects.
func wrap(p *Pack, name string, top plumbing.Hash) *Crafted {
	return &Crafted{Name: name, Pack: p, Commit: commit(p, tree(p, "100644", "bomb.bin", top))}
}

func tree(p *Pack, mode, name string, h plumbing.Hash) plumbing.Hash {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\x00", mode, name)
	b.Write(h[:])
	t := Hash("tree", b.Bytes())
	p.Entry(t, Tree, uint64(b.Len()), nil, b.Bytes())
	return t
}

func commit(p *Pack, tree plumbing.Hash) plumbing.Hash {
	raw := []byte("tree " + tree.String() + "\nauthor T <t@example.invalid> 1700000000 +0000\n" +
		"committer T <t@example.invalid> 1700000000 +0000\n\ncrafted\n")
	h := Hash("commit", raw)
	p.Entry(h, Commit, uint64(len(raw)), nil, raw)
	return h
}

// madeUp is a name for an object whose content nobody computes.
func madeUp(what string) plumbing.Hash {
	return Hash("blob", []byte(strings.Repeat(what, 3)))
}
