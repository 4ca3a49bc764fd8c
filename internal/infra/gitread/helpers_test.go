package gitread

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/storage/memory"

	"gitfleet/internal/devstack/repogen"
)

// builder writes objects straight into an in-memory repository (or, see
// walkMode.newBuilder, an on-disk one).
type builder struct {
	t    testing.TB
	repo *git.Repository
	time int64
	dir  string // the repository's, on disk (walkMode.newBuilder); "" in memory
}

func newBuilder(t testing.TB) *builder {
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &builder{t: t, repo: repo, time: 1700000000}
}

func (b *builder) write(typ plumbing.ObjectType, content []byte) plumbing.Hash {
	b.t.Helper()
	obj := b.repo.Storer.NewEncodedObject()
	obj.SetType(typ)
	w, err := obj.Writer()
	if err != nil {
		b.t.Fatal(err)
	}
	w.Write(content)
	w.Close()
	h, err := b.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		b.t.Fatal(err)
	}
	return h
}

func (b *builder) blob(content string) plumbing.Hash {
	return b.write(plumbing.BlobObject, []byte(content))
}

// testEntry is a file of a test tree: content for a blob (regular unless mode
// says otherwise), or target for a gitlink.
type testEntry struct {
	mode    filemode.FileMode
	content string
	target  plumbing.Hash
}

func file(content string) testEntry   { return testEntry{mode: filemode.Regular, content: content} }
func symlink(target string) testEntry { return testEntry{mode: filemode.Symlink, content: target} }
func executable(content string) testEntry {
	return testEntry{mode: filemode.Executable, content: content}
}
func gitlink(c plumbing.Hash) testEntry { return testEntry{mode: filemode.Submodule, target: c} }

// tree writes the tree of files (slash-separated paths) and returns its hash.
func (b *builder) tree(files map[string]testEntry) plumbing.Hash {
	b.t.Helper()
	type item struct {
		name string
		mode filemode.FileMode
		h    plumbing.Hash
	}
	var items []item
	sub := map[string]map[string]testEntry{}
	for p, e := range files {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			if sub[dir] == nil {
				sub[dir] = map[string]testEntry{}
			}
			sub[dir][rest] = e
			continue
		}
		h := e.target
		if e.mode != filemode.Submodule {
			h = b.blob(e.content)
		}
		items = append(items, item{p, e.mode, h})
	}
	for dir, fs := range sub {
		items = append(items, item{dir, filemode.Dir, b.tree(fs)})
	}
	key := func(it item) string {
		if it.mode == filemode.Dir {
			return it.name + "/"
		}
		return it.name
	}
	sort.Slice(items, func(i, j int) bool { return key(items[i]) < key(items[j]) })
	var buf bytes.Buffer
	for _, it := range items {
		fmt.Fprintf(&buf, "%o %s\x00", uint32(it.mode), it.name)
		buf.Write(it.h[:])
	}
	return b.write(plumbing.TreeObject, buf.Bytes())
}

// commit writes a commit of files with the given parents, dated one minute
// after the previous commit the builder wrote.
func (b *builder) commit(files map[string]testEntry, parents ...plumbing.Hash) plumbing.Hash {
	b.t.Helper()
	b.time += 60
	return b.commitAt(b.time, files, parents...)
}

func (b *builder) commitAt(when int64, files map[string]testEntry, parents ...plumbing.Hash) plumbing.Hash {
	b.t.Helper()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "tree %s\n", b.tree(files))
	for _, p := range parents {
		fmt.Fprintf(&buf, "parent %s\n", p)
	}
	fmt.Fprintf(&buf, "author T <t@example.invalid> %d +0000\ncommitter T <t@example.invalid> %d +0000\n\nmsg %d\n", when, when, when)
	return b.write(plumbing.CommitObject, buf.Bytes())
}

func (b *builder) tag(name string, target plumbing.Hash) plumbing.Hash {
	b.t.Helper()
	return b.write(plumbing.TagObject, fmt.Appendf(nil,
		"object %s\ntype commit\ntag %s\ntagger T <t@example.invalid> 1700000000 +0000\n\nrelease\n", target, name))
}

// with returns a copy of files with the changes applied (an entry with mode
// 0 deletes).
func with(files map[string]testEntry, changes map[string]testEntry) map[string]testEntry {
	out := make(map[string]testEntry, len(files)+len(changes))
	for p, e := range files {
		out[p] = e
	}
	for p, e := range changes {
		if e.mode == 0 {
			delete(out, p)
		} else {
			out[p] = e
		}
	}
	return out
}

var deleted = testEntry{}

// walkAll walks ranges and returns the blobs reported, in order.
func walkAll(t testing.TB, repo *git.Repository, opts Options, ranges ...Range) ([]Blob, Stats) {
	t.Helper()
	var got []Blob
	st, err := New(repo, opts).Walk(context.Background(), ranges, func(b Blob) error {
		got = append(got, b)
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return got, st
}

// contents lists "path=content" of blobs (content read back), sorted.
func contents(t testing.TB, repo *git.Repository, blobs []Blob) []string {
	t.Helper()
	var out []string
	for _, b := range blobs {
		data, _, err := ReadBlob(repo, b.Hash, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Path+"="+string(data))
	}
	sort.Strings(out)
	return out
}

// The generated scale repository, shared by the scale test and the
// benchmarks: 10,000 commits of 5 files, 1,000 refs (~50,000 blobs).
var scaleSpec = repogen.Spec{
	Commits:        10000,
	FilesPerCommit: 5,
	Refs:           1000,
	BlobSize:       1024,
	Binary:         50,
	Seed:           42,
	Secrets: []repogen.Secret{
		{Commit: 1234, Path: "config/deploy/prod.env", Content: "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"},
	},
}

var (
	scaleOnce sync.Once
	scaleDir  string
	scaleInfo repogen.Info
	scaleErr  error
	scaleGen  time.Duration
	tmpRoot   string
)

func scaleRepo(t testing.TB) (string, repogen.Info) {
	t.Helper()
	scaleOnce.Do(func() {
		scaleDir = tmpRoot + "/scale.git"
		start := time.Now()
		scaleInfo, scaleErr = repogen.Generate(scaleDir, scaleSpec)
		scaleGen = time.Since(start)
	})
	if scaleErr != nil {
		t.Fatal(scaleErr)
	}
	return scaleDir, scaleInfo
}

func TestMain(m *testing.M) {
	var err error
	tmpRoot, err = os.MkdirTemp("", "gitread-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// allRefs returns one Range per ref of repo (no stops), in ref name order.
func allRefs(t testing.TB, repo *git.Repository) []Range {
	t.Helper()
	iter, err := repo.References()
	if err != nil {
		t.Fatal(err)
	}
	var ranges []Range
	iter.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference {
			ranges = append(ranges, Range{Ref: r.Name().String(), Tip: r.Hash()})
		}
		return nil
	})
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].Ref < ranges[j].Ref })
	return ranges
}
