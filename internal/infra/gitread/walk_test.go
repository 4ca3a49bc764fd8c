package gitread

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// base is a small project with nested directories.
var base = map[string]testEntry{
	"README.md":           file("readme"),
	"a/one.go":            file("one"),
	"a/two.go":            file("two"),
	"a/deep/x/y/three.go": file("three"),
	"b/four.go":           file("four"),
	"b/five.go":           file("five"),
	"c/six.txt":           file("six"),
}

func TestWalk(t *testing.T) {
	type result struct {
		blobs []Blob
		stats Stats
	}
	cases := []struct {
		name string
		// setup builds the repository and returns the ranges to walk.
		setup func(b *builder) ([]Range, Options)
		// want lists "path=content" of the reported blobs, sorted.
		want []string
		// anyBlobs skips the comparison with want.
		anyBlobs bool
		check    func(t *testing.T, b *builder, r result)
	}{
		{
			name: "root commit introduces its whole tree",
			setup: func(b *builder) ([]Range, Options) {
				c := b.commit(base)
				return []Range{{Ref: "main", Tip: c}}, Options{}
			},
			want: []string{"README.md=readme", "a/deep/x/y/three.go=three", "a/one.go=one", "a/two.go=two", "b/five.go=five", "b/four.go=four", "c/six.txt=six"},
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.Commits != 1 || r.stats.Trees != 7 || r.stats.Blobs != 7 {
					t.Errorf("stats = %+v", r.stats)
				}
				for _, bl := range r.blobs {
					if bl.Ref != "main" || bl.Mode != filemode.Regular || bl.Size != int64(len(contentOf(t, b, bl))) {
						t.Errorf("blob %+v", bl)
					}
				}
			},
		},
		{
			name: "modification introduces only the changed blob, unchanged subtrees skipped",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				c2 := b.commit(with(base, map[string]testEntry{"a/deep/x/y/three.go": file("THREE")}), c1)
				return []Range{{Ref: "main", Tip: c2, Stops: []plumbing.Hash{c1}}}, Options{}
			},
			want: []string{"a/deep/x/y/three.go=THREE"},
			check: func(t *testing.T, b *builder, r result) {
				// Both sides of root, a, a/deep, a/deep/x, a/deep/x/y; b and c skipped.
				if r.stats.Trees != 10 || r.stats.Commits != 1 {
					t.Errorf("stats = %+v, want 10 trees, 1 commit", r.stats)
				}
				if r.blobs[0].Commit == plumbing.ZeroHash {
					t.Error("no commit")
				}
			},
		},
		{
			name: "deletion and mode change introduce nothing, type changes do",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				c2 := b.commit(with(base, map[string]testEntry{
					"README.md": deleted,
					"a/one.go":  executable("one"),                         // mode only
					"c/six.txt": deleted, "c/six.txt/new": file("dir now"), // file becomes directory
					"b/four.go": deleted, "b/five.go": deleted, "b": file("b was a directory"),
				}), c1)
				return []Range{{Ref: "main", Tip: c2, Stops: []plumbing.Hash{c1}}}, Options{}
			},
			want: []string{"b=b was a directory", "c/six.txt/new=dir now"},
		},
		{
			name: "rename of identical content reports nothing new with the caller's Seen",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				seen := map[plumbing.Hash]bool{}
				for _, e := range base {
					seen[b.blob(e.content)] = true // scanned by an earlier walk
				}
				c2 := b.commit(with(base, map[string]testEntry{"a/one.go": deleted, "moved/one.go": file("one")}), c1)
				return []Range{{Ref: "main", Tip: c2, Stops: []plumbing.Hash{c1}}},
					Options{Seen: func(h plumbing.Hash) bool { return seen[h] }}
			},
			want: nil,
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.SkippedSeen != 1 {
					t.Errorf("stats = %+v, want 1 skipped", r.stats)
				}
			},
		},
		{
			name: "a blob met twice in one walk is reported once, at the oldest commit",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				c2 := b.commit(with(base, map[string]testEntry{"copy/one.go": file("one"), "also/one.go": file("one")}), c1)
				return []Range{{Ref: "main", Tip: c2}}, Options{}
			},
			want: []string{"README.md=readme", "a/deep/x/y/three.go=three", "a/one.go=one", "a/two.go=two", "b/five.go=five", "b/four.go=four", "c/six.txt=six"},
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.Duplicates != 2 || r.stats.Commits != 2 {
					t.Errorf("stats = %+v, want 2 duplicates", r.stats)
				}
			},
		},
		{
			name: "merge commit is diffed against its first parent; the side branch's commits are walked",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				side := b.commit(with(base, map[string]testEntry{"side.txt": file("side")}), c1)
				c2 := b.commit(with(base, map[string]testEntry{"main.txt": file("main")}), c1)
				m := b.commit(with(base, map[string]testEntry{"side.txt": file("side"), "main.txt": file("main"), "README.md": file("resolved")}), c2, side)
				return []Range{{Ref: "main", Tip: m, Stops: []plumbing.Hash{c1}}}, Options{}
			},
			want: []string{"README.md=resolved", "main.txt=main", "side.txt=side"},
			check: func(t *testing.T, b *builder, r result) {
				// Oldest first: side, c2, then the merge; side.txt is met
				// first on the side branch, again in the merge's diff.
				if got := []string{r.blobs[0].Path, r.blobs[1].Path, r.blobs[2].Path}; !slices.Equal(got, []string{"side.txt", "main.txt", "README.md"}) {
					t.Errorf("order = %v", got)
				}
				if r.stats.Commits != 3 || r.stats.Duplicates != 1 {
					t.Errorf("stats = %+v", r.stats)
				}
			},
		},
		{
			name: "merge whose side branch is excluded reports the side's blobs again (Seen filters them)",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				side := b.commit(with(base, map[string]testEntry{"side.txt": file("side")}), c1)
				c2 := b.commit(with(base, map[string]testEntry{"main.txt": file("main")}), c1)
				m := b.commit(with(base, map[string]testEntry{"side.txt": file("side"), "main.txt": file("main")}), c2, side)
				return []Range{{Ref: "main", Tip: m, Stops: []plumbing.Hash{side}}}, Options{}
			},
			want: []string{"main.txt=main", "side.txt=side"},
		},
		{
			name: "range with stops walks only the new commits",
			setup: func(b *builder) ([]Range, Options) {
				files := base
				var cs []plumbing.Hash
				var parents []plumbing.Hash
				for i := 0; i < 6; i++ {
					files = with(files, map[string]testEntry{fmt.Sprintf("f%d", i): file(fmt.Sprint(i))})
					c := b.commit(files, parents...)
					cs, parents = append(cs, c), []plumbing.Hash{c}
				}
				return []Range{{Ref: "main", Tip: cs[5], Stops: []plumbing.Hash{cs[3]}}}, Options{}
			},
			want: []string{"f4=4", "f5=5"},
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.Commits != 2 {
					t.Errorf("stats = %+v", r.stats)
				}
			},
		},
		{
			name: "a stop that does not exist is ignored",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(map[string]testEntry{"x": file("x")})
				c2 := b.commit(map[string]testEntry{"x": file("x2")}, c1)
				gone := plumbing.NewHash("0123456789012345678901234567890123456789")
				return []Range{{Ref: "main", Tip: c2, Stops: []plumbing.Hash{gone}}}, Options{}
			},
			want: []string{"x=x", "x=x2"},
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.MissingStops != 1 || r.stats.Commits != 2 {
					t.Errorf("stats = %+v", r.stats)
				}
			},
		},
		{
			name: "force-pushed history: the old tip still excludes the shared history",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				old2 := b.commit(with(base, map[string]testEntry{"old": file("old2")}), c1)
				old3 := b.commit(with(base, map[string]testEntry{"old": file("old3")}), old2)
				new2 := b.commit(with(base, map[string]testEntry{"new": file("new2")}), c1)
				new3 := b.commit(with(base, map[string]testEntry{"new": file("new3")}), new2)
				return []Range{{Ref: "main", Tip: new3, Stops: []plumbing.Hash{old3}}}, Options{}
			},
			want: []string{"new=new2", "new=new3"},
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.Commits != 2 {
					t.Errorf("stats = %+v", r.stats)
				}
			},
		},
		{
			name: "empty range: the tip is a stop",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				return []Range{{Ref: "main", Tip: c1, Stops: []plumbing.Hash{c1}}}, Options{}
			},
			want: nil,
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.EmptyRanges != 1 || r.stats.Commits != 0 || r.stats.Trees != 0 {
					t.Errorf("stats = %+v", r.stats)
				}
			},
		},
		{
			name: "tip behind its stop is empty",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(base)
				c2 := b.commit(with(base, map[string]testEntry{"n": file("n")}), c1)
				return []Range{{Ref: "main", Tip: c1, Stops: []plumbing.Hash{c2}}}, Options{}
			},
			want: nil,
		},
		{
			name: "annotated tags are peeled",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(map[string]testEntry{"x": file("1")})
				c2 := b.commit(map[string]testEntry{"x": file("2")}, c1)
				c3 := b.commit(map[string]testEntry{"x": file("3")}, c2)
				return []Range{{Ref: "refs/tags/v3", Tip: b.tag("v3", c3), Stops: []plumbing.Hash{b.tag("v1", c1)}}}, Options{}
			},
			want: []string{"x=2", "x=3"},
		},
		{
			name: "symlinks are reported, gitlinks skipped",
			setup: func(b *builder) ([]Range, Options) {
				sub := plumbing.NewHash("1111111111111111111111111111111111111111") // not in this repository
				c := b.commit(map[string]testEntry{"link": symlink("target/file"), "vendor/lib": gitlink(sub), "f": file("f")})
				return []Range{{Ref: "main", Tip: c}}, Options{}
			},
			want: []string{"f=f", "link=target/file"},
			check: func(t *testing.T, b *builder, r result) {
				for _, bl := range r.blobs {
					if bl.Path == "link" && bl.Mode != filemode.Symlink {
						t.Errorf("symlink mode %v", bl.Mode)
					}
				}
			},
		},
		{
			name: "Seen is asked once per blob hash and honoured",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commit(map[string]testEntry{"a": file("dup"), "b": file("dup"), "c": file("skip"), "d": file("keep")})
				c2 := b.commit(map[string]testEntry{"a": file("dup"), "b": file("dup"), "c": file("skip"), "d": file("keep"), "e": file("skip"), "f": file("dup")}, c1)
				skip := b.blob("skip")
				asked := map[plumbing.Hash]int{}
				b.t.Cleanup(func() {
					for h, n := range asked {
						if n != 1 {
							b.t.Errorf("Seen(%s) called %d times", h, n)
						}
					}
					if len(asked) != 3 {
						b.t.Errorf("Seen asked about %d blobs, want 3", len(asked))
					}
				})
				return []Range{{Ref: "main", Tip: c2}, {Ref: "other", Tip: c2}}, Options{Seen: func(h plumbing.Hash) bool {
					asked[h]++
					return h == skip
				}}
			},
			want: []string{"a=dup", "d=keep"},
		},
		{
			name: "many refs into one history walk each commit once",
			setup: func(b *builder) ([]Range, Options) {
				var ranges []Range
				var parents []plumbing.Hash
				for i := 0; i < 100; i++ {
					c := b.commit(map[string]testEntry{"f": file(fmt.Sprint(i)), "const": file("c")}, parents...)
					parents = []plumbing.Hash{c}
					if i%2 == 0 {
						// refs listed newest first, the worst order for sharing
						ranges = append([]Range{{Ref: fmt.Sprint("r", i), Tip: c}}, ranges...)
					}
				}
				return ranges, Options{}
			},
			anyBlobs: true,
			check: func(t *testing.T, b *builder, r result) {
				// Commit 99 has no ref; the first range walks 0..98.
				if r.stats.Commits != 99 || r.stats.CommitsRead != 99 || r.stats.Blobs != 100 || r.stats.SharedCommits != 49 || r.stats.EmptyRanges != 49 {
					t.Errorf("stats = %+v", r.stats)
				}
			},
		},
		{
			name: "a later range with its own stop reaches history an earlier range excluded",
			setup: func(b *builder) ([]Range, Options) {
				var cs []plumbing.Hash
				var parents []plumbing.Hash
				for i := 0; i < 10; i++ {
					c := b.commit(map[string]testEntry{"f": file(fmt.Sprint(i))}, parents...)
					cs, parents = append(cs, c), []plumbing.Hash{c}
				}
				return []Range{
					{Ref: "main", Tip: cs[9], Stops: []plumbing.Hash{cs[7]}},    // 8, 9
					{Ref: "feature", Tip: cs[9], Stops: []plumbing.Hash{cs[4]}}, // 5..9: 5, 6, 7 new
				}, Options{}
			},
			want: []string{"f=5", "f=6", "f=7", "f=8", "f=9"},
			check: func(t *testing.T, b *builder, r result) {
				if r.stats.Commits != 5 || r.stats.SharedCommits != 2 {
					t.Errorf("stats = %+v", r.stats)
				}
				if r.blobs[0].Ref != "main" || r.blobs[2].Ref != "feature" {
					t.Errorf("refs: %+v", r.blobs)
				}
			},
		},
		{
			name: "a missing parent (shallow clone) makes its child a root",
			setup: func(b *builder) ([]Range, Options) {
				gone := plumbing.NewHash("4444444444444444444444444444444444444444")
				c1 := b.commit(map[string]testEntry{"f": file("1"), "g": file("g")}, gone)
				c2 := b.commit(map[string]testEntry{"f": file("2"), "g": file("g")}, c1)
				return []Range{{Ref: "main", Tip: c2}}, Options{}
			},
			want: []string{"f=1", "f=2", "g=g"},
			check: func(t *testing.T, b *builder, r result) {
				// No shallow file lists c1: its parent should have been there.
				if r.stats.MissingCommits != 1 {
					t.Errorf("stats = %+v, want 1 missing commit", r.stats)
				}
			},
		},
		{
			name: "skewed commit dates do not lose commits",
			setup: func(b *builder) ([]Range, Options) {
				c1 := b.commitAt(1000, map[string]testEntry{"f": file("1")})
				c2 := b.commitAt(5000, map[string]testEntry{"f": file("2")}, c1) // clock ahead
				c3 := b.commitAt(2000, map[string]testEntry{"f": file("3")}, c2)
				c4 := b.commitAt(3000, map[string]testEntry{"f": file("4")}, c3)
				c5 := b.commitAt(100, map[string]testEntry{"f": file("5")}, c4) // clock behind
				return []Range{{Ref: "main", Tip: c5, Stops: []plumbing.Hash{c3}}}, Options{}
			},
			want: []string{"f=4", "f=5"},
		},
	}
	for _, m := range walkModes {
		t.Run(m.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					b := m.newBuilder(t)
					ranges, opts := tc.setup(b)
					opts = m.prepare(t, b, opts)
					blobs, st := walkAll(t, b.repo, opts, ranges...)
					if !tc.anyBlobs {
						if got := contents(t, b.repo, blobs); !slices.Equal(got, tc.want) {
							t.Errorf("blobs:\n got %q\nwant %q", got, tc.want)
						}
					}
					if tc.check != nil {
						tc.check(t, b, result{blobs, st})
					}
				})
			}
		})
	}
}

// Again hears every introduction of a blob already met, with its path and
// commit: copies in one commit, a copy in a later one, the same blob
// restored, and a merge meeting the side branch's blob again; its error
// stops the walk.
func TestWalkAgain(t *testing.T) {
	for _, m := range walkModes {
		t.Run(m.name, func(t *testing.T) {
			b := m.newBuilder(t)
			c1 := b.commit(map[string]testEntry{"a/key": file("secret"), "b/copy": file("secret"), "x": file("1")})
			c2 := b.commit(map[string]testEntry{"a/key": file("secret"), "b/copy": file("secret"), "c/again": file("secret"), "x": file("2")}, c1)
			c3 := b.commit(map[string]testEntry{"x": file("1")}, c2) // x restored, the copies deleted
			side := b.commit(map[string]testEntry{"x": file("1"), "side": file("s")}, c3)
			main := b.commit(map[string]testEntry{"x": file("1"), "main": file("m")}, c3)
			merge := b.commit(map[string]testEntry{"x": file("1"), "side": file("s"), "main": file("m")}, main, side)
			var again []string
			opts := m.prepare(t, b, Options{Again: func(bl Blob) error {
				again = append(again, fmt.Sprintf("%s@%s=%s", bl.Path, shortCommit(bl.Commit, c1, c2, c3, merge), contentOf(t, b, bl)))
				return nil
			}})
			blobs, st := walkAll(t, b.repo, opts, Range{Ref: "main", Tip: merge})
			want := []string{"b/copy@c1=secret", "c/again@c2=secret", "x@c3=1", "side@merge=s"}
			if !slices.Equal(again, want) {
				t.Errorf("again = %q, want %q", again, want)
			}
			if st.Duplicates != len(want) || len(blobs) != 5 {
				t.Errorf("stats = %+v, %d blobs", st, len(blobs))
			}

			stop := errors.New("stop")
			opts.Again = func(Blob) error { return stop }
			if _, err := New(b.repo, opts).Walk(context.Background(), []Range{{Ref: "main", Tip: merge}}, func(Blob) error { return nil }); !errors.Is(err, stop) {
				t.Errorf("Walk = %v, want Again's error", err)
			}
		})
	}
}

// shortCommit names h as one of c1, c2, c3 and merge.
func shortCommit(h plumbing.Hash, c1, c2, c3, merge plumbing.Hash) string {
	for name, c := range map[string]plumbing.Hash{"c1": c1, "c2": c2, "c3": c3, "merge": merge} {
		if h == c {
			return name
		}
	}
	return h.String()
}

func contentOf(t *testing.T, b *builder, bl Blob) string {
	t.Helper()
	data, size, err := ReadBlob(b.repo, bl.Hash, 0)
	if err != nil || size != int64(len(data)) {
		t.Fatalf("ReadBlob: %v (size %d)", err, size)
	}
	return string(data)
}

func TestTipsThatAreNoCommits(t *testing.T) {
	for _, m := range walkModes {
		t.Run(m.name, func(t *testing.T) { testTipsThatAreNoCommits(t, m) })
	}
}

// Refs may name any object, or one the repository lacks: a missing tip is
// skipped and counted, a tree's or a blob's content is reported with no
// commit, and only a range without a tip is an error.
func testTipsThatAreNoCommits(t *testing.T, m walkMode) {
	b := m.newBuilder(t)
	c := b.commit(base)
	key := b.blob("key")
	tree := b.tree(map[string]testEntry{"deploy/ci.env": file("token"), "README.md": file("readme")})
	w := New(b.repo, m.prepare(t, b, Options{}))
	var got []Blob
	missing := plumbing.NewHash("2222222222222222222222222222222222222222")
	st, err := w.Walk(context.Background(), []Range{
		{Ref: "gone", Tip: missing}, {Ref: "ok", Tip: c}, {Ref: "refs/tags/key", Tip: b.tag("key", key)}, {Ref: "snap", Tip: tree},
	}, func(bl Blob) error { got = append(got, bl); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.MissingTips != 1 || st.BlobTips != 1 || st.TreeTips != 1 || st.Ranges != 4 || st.Commits != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(got) != 9 {
		t.Fatalf("%d blobs, want the commit's 7, the key and the tree's new token", len(got))
	}
	if k := got[7]; k.Hash != key || k.Path != "refs/tags/key" || !k.Commit.IsZero() || k.Ref != "refs/tags/key" || k.Size != 3 {
		t.Errorf("blob of a tag of a blob: %+v", k)
	}
	if tok := got[8]; tok.Path != "deploy/ci.env" || !tok.Commit.IsZero() || tok.Ref != "snap" || contentOf(t, b, tok) != "token" {
		t.Errorf("blob of a tree tip: %+v", tok)
	}
	if _, err := w.Walk(context.Background(), []Range{{Ref: "zero"}}, func(Blob) error { return nil }); !errors.Is(err, ErrTipNotFound) {
		t.Errorf("zero tip: %v", err)
	}
}

func TestStopsEarly(t *testing.T) {
	for _, m := range walkModes {
		t.Run(m.name, func(t *testing.T) { testStopsEarly(t, m) })
	}
}

func testStopsEarly(t *testing.T, m walkMode) {
	b := m.newBuilder(t)
	var parents []plumbing.Hash
	for i := 0; i < 50; i++ {
		c := b.commit(map[string]testEntry{"f": file(fmt.Sprint(i)), "g": file(fmt.Sprint("g", i))}, parents...)
		parents = []plumbing.Hash{c}
	}
	tip := parents[0]
	w := New(b.repo, m.prepare(t, b, Options{}))

	t.Run("fn error", func(t *testing.T) {
		boom := errors.New("boom")
		n := 0
		_, err := w.Walk(context.Background(), []Range{{Tip: tip}}, func(Blob) error {
			if n++; n == 3 {
				return boom
			}
			return nil
		})
		if err != boom || n != 3 {
			t.Errorf("err = %v after %d blobs", err, n)
		}
	})
	t.Run("cancelled during the walk", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		n := 0
		st, err := w.Walk(ctx, []Range{{Tip: tip}}, func(Blob) error {
			if n++; n == 3 {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) || n > 4 || st.Commits > 2 {
			t.Errorf("err = %v after %d blobs, %+v", err, n, st)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n := 0
		_, err := w.Walk(ctx, []Range{{Tip: tip}}, func(Blob) error { n++; return nil })
		if !errors.Is(err, context.Canceled) || n != 0 {
			t.Errorf("err = %v after %d blobs", err, n)
		}
	})
}

func TestReadBlob(t *testing.T) {
	for _, m := range walkModes {
		t.Run(m.name, func(t *testing.T) { testReadBlob(t, m) })
	}
}

func testReadBlob(t *testing.T, m walkMode) {
	b := m.newBuilder(t)
	h := b.blob("0123456789")
	opts := m.prepare(t, b, Options{})
	data, size, err := ReadBlob(b.repo, h, 10)
	if err != nil || string(data) != "0123456789" || size != 10 {
		t.Errorf("ReadBlob = %q, %d, %v", data, size, err)
	}
	data, size, err = New(b.repo, opts).ReadBlob(h, 9)
	if !errors.Is(err, ErrTooLarge) || data != nil || size != 10 {
		t.Errorf("oversized: %q, %d, %v", data, size, err)
	}
	if _, _, err := ReadBlob(b.repo, plumbing.NewHash("3333333333333333333333333333333333333333"), 0); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Errorf("missing: %v", err)
	}
}

func TestCompareEntries(t *testing.T) {
	// Git's order: "a" (file) < "a-b" < "a.b" < "a/" (dir "a") < "a0".
	names := []struct {
		n   string
		dir bool
	}{{"a", false}, {"a-b", false}, {"a.b", true}, {"a", true}, {"a0", false}, {"b", false}}
	for i := range names {
		for j := range names {
			c := compareEntries([]byte(names[i].n), names[i].dir, []byte(names[j].n), names[j].dir)
			if (c < 0) != (i < j) || (c == 0) != (i == j) {
				t.Errorf("compare(%v, %v) = %d", names[i], names[j], c)
			}
		}
	}
}

func TestParseCommit(t *testing.T) {
	raw := "tree 1111111111111111111111111111111111111111\n" +
		"parent 2222222222222222222222222222222222222222\n" +
		"parent 3333333333333333333333333333333333333333\n" +
		"author A <a@x> 1 +0000\n" +
		"committer C <c@x> 1700000123 -0700\n" +
		"gpgsig -----BEGIN PGP SIGNATURE-----\n parent 4444444444444444444444444444444444444444\n -----END PGP SIGNATURE-----\n" +
		"\nparent in the message 5555555555555555555555555555555555555555\n"
	var ci commitInfo
	if err := parseCommit([]byte(raw), &ci); err != nil {
		t.Fatal(err)
	}
	if ci.tree.String() != "1111111111111111111111111111111111111111" || len(ci.parents) != 2 || ci.when != 1700000123 {
		t.Errorf("%+v", ci)
	}
	if err := parseCommit([]byte("author A <a@x> 1 +0000\n\n"), &ci); err == nil {
		t.Error("commit without tree accepted")
	}
}
