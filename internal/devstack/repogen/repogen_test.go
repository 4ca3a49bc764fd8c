package repogen

import (
	"bytes"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/gittest"
)

var smallSpec = Spec{
	Commits:        60,
	FilesPerCommit: 4,
	Refs:           10,
	BlobSize:       300,
	Binary:         3,
	Seed:           7,
	Secrets: []Secret{
		{Commit: 0, Path: "first.env", Content: "ROOT_SECRET=one\n"},
		{Commit: 17, Path: "config/prod/app.env", Content: "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"},
		{Commit: 59, Path: "last.txt", Content: "ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
	},
}

func gitOut(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gittest.Run(dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo.git")
	info, err := Generate(dir, smallSpec)
	if err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, dir, "rev-list", "--count", "main"); got != "60" {
		t.Errorf("commits on main = %s", got)
	}
	if got := gitOut(t, dir, "rev-list", "--count", "--all"); got != "60" {
		t.Errorf("commits in all = %s", got)
	}
	refs := strings.Split(gitOut(t, dir, "for-each-ref"), "\n")
	if len(refs) != 10 || len(info.Refs) != 10 {
		t.Errorf("refs = %d, info.Refs = %d", len(refs), len(info.Refs))
	}
	if info.Refs["refs/heads/main"] != info.Head || gitOut(t, dir, "rev-parse", "HEAD") != info.Head {
		t.Errorf("head %s, refs %v", info.Head, info.Refs)
	}
	for name, h := range info.Refs {
		if got := gitOut(t, dir, "rev-parse", name+"^{commit}"); got != h {
			t.Errorf("%s = %s, info says %s", name, got, h)
		}
	}
	if got := gitOut(t, dir, "rev-parse", "main~59"); got != info.Commits[0] {
		t.Errorf("root %s, info says %s", got, info.Commits[0])
	}
	if gitOut(t, dir, "cat-file", "-t", "refs/tags/v0002") != "tag" {
		t.Error("v0002 is not an annotated tag")
	}

	var blobs int
	var bytes int64
	for _, line := range strings.Split(gitOut(t, dir, "cat-file", "--batch-all-objects", "--batch-check"), "\n") {
		f := strings.Fields(line)
		if f[1] == "blob" {
			blobs++
			n, _ := strconv.ParseInt(f[2], 10, 64)
			bytes += n
		}
	}
	// 60 commits × 4 files, 3 secrets, 3 binaries, all distinct.
	if blobs != info.Blobs || bytes != info.BlobBytes || blobs != 60*4+3+3 {
		t.Errorf("blobs in repository %d (%d bytes), info says %d (%d bytes)", blobs, bytes, info.Blobs, info.BlobBytes)
	}

	for _, s := range smallSpec.Secrets {
		c := info.Commits[s.Commit]
		if got, err := gittest.Run(dir, nil, "cat-file", "blob", c+":"+s.Path); err != nil || got != s.Content {
			t.Errorf("secret at %s:%s = %q, %v", c, s.Path, got, err)
		}
		if s.Commit > 0 {
			if _, err := gittest.Run(dir, nil, "cat-file", "-e", info.Commits[s.Commit-1]+":"+s.Path); err == nil {
				t.Errorf("secret %s already in the commit before", s.Path)
			}
		}
	}

	// Binary blobs carry NULs.
	bins := strings.Fields(gitOut(t, dir, "ls-tree", "--name-only", "main", "assets/bin/"))
	if len(bins) != 3 {
		t.Fatalf("binaries: %v", bins)
	}
	if got, _ := gittest.Run(dir, nil, "cat-file", "blob", "main:"+bins[0]); !strings.Contains(got, "\x00") {
		t.Error("binary blob without NUL")
	}

	// Every commit changes FilesPerCommit generated files (plus planted ones).
	for _, i := range []int{1, 30, 40, 59} {
		got := gitOut(t, dir, "diff-tree", "--no-commit-id", "--name-only", "-r", info.Commits[i])
		n := len(strings.Split(got, "\n"))
		want := 4
		for _, s := range smallSpec.Secrets {
			if s.Commit == i {
				want++
			}
		}
		if i == 40 {
			want++ // a binary
		}
		if n != want {
			t.Errorf("commit %d changes %d files, want %d", i, n, want)
		}
	}
}

func TestDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := Stream(&a, smallSpec); err != nil {
		t.Fatal(err)
	}
	if err := Stream(&b, smallSpec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("same spec, different streams")
	}
	other := smallSpec
	other.Seed++
	b.Reset()
	Stream(&b, other)
	if bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("different seeds, same stream")
	}

	i1, err := Generate(filepath.Join(t.TempDir(), "a"), smallSpec)
	if err != nil {
		t.Fatal(err)
	}
	i2, err := Generate(filepath.Join(t.TempDir(), "b"), smallSpec)
	if err != nil {
		t.Fatal(err)
	}
	if i1.Head != i2.Head || i1.Blobs != i2.Blobs {
		t.Errorf("heads %s and %s", i1.Head, i2.Head)
	}
	// The stream alone, imported elsewhere, gives the same history.
	dir := t.TempDir()
	if _, err := gittest.Run(dir, nil, "init", "--quiet", "--bare", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := gittest.Run(dir, bytes.NewReader(a.Bytes()), "fast-import", "--quiet"); err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, dir, "rev-parse", "refs/heads/main"); got != i1.Head {
		t.Errorf("imported stream head %s, Generate's %s", got, i1.Head)
	}
}

func TestContentLooksLikeCode(t *testing.T) {
	var buf bytes.Buffer
	spec := Spec{Commits: 200, FilesPerCommit: 5, BlobSize: 2000, Seed: 3}
	if err := Stream(&buf, spec); err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, line := range strings.Split(strings.ToLower(buf.String()), "\n") {
		if !strings.HasPrefix(line, "author ") { // the stream's commit headers
			text = append(text, line)
		}
	}
	s := strings.Join(text, "\n")
	// Nothing a keyword prefilter keys on, unless planted.
	for _, w := range []string{"key", "token", "secret", "password", "passwd", "auth", "credential", "private", "api"} {
		if strings.Contains(s, w) {
			t.Errorf("generated content contains %q", w)
		}
	}
	for _, w := range []string{"func ", "return ", "// ", "def ", "class ", "enabled: ", "## "} {
		if !strings.Contains(s, w) {
			t.Errorf("generated content lacks %q", w)
		}
	}
	if strings.Contains(s, "\x00") {
		t.Error("NUL in text content")
	}
}

func TestTinySpec(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny.git")
	info, err := Generate(dir, Spec{Commits: 3, Refs: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Refs) != 10 || info.Blobs != 0 || gitOut(t, dir, "rev-list", "--count", "--all") != "3" {
		t.Errorf("info %+v", info)
	}
}

func TestSpecErrors(t *testing.T) {
	for _, s := range []Spec{
		{},
		{Commits: 1, FilesPerCommit: -1},
		{Commits: 2, Secrets: []Secret{{Commit: 2, Path: "x", Content: "y"}}},
		{Commits: 2, Secrets: []Secret{{Commit: 0, Path: "../x", Content: "y"}}},
		{Commits: 2, Secrets: []Secret{{Commit: 0, Path: "a\nb", Content: "y"}}},
		{Commits: 2, Secrets: []Secret{{Commit: 0, Path: "/abs", Content: "y"}}},
	} {
		if err := Stream(io.Discard, s); err == nil {
			t.Errorf("spec %+v accepted", s)
		}
	}
	dir := t.TempDir()
	if _, err := Generate(dir, smallSpec); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(dir, smallSpec); err == nil {
		t.Error("generated into a non-empty directory")
	}
}

// The scale of the gitread scale test: 10,000 commits × 5 files, 1,000 refs.
var scaleSpec = Spec{Commits: 10000, FilesPerCommit: 5, Refs: 1000, BlobSize: 1024, Binary: 50, Seed: 42}

func BenchmarkGenerate(b *testing.B) {
	for i := 0; i < b.N; i++ {
		start := time.Now()
		info, err := Generate(filepath.Join(b.TempDir(), "scale.git"), scaleSpec)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/repo")
		b.ReportMetric(float64(info.Blobs), "blobs")
	}
}

func BenchmarkStream(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := Stream(io.Discard, scaleSpec); err != nil {
			b.Fatal(err)
		}
	}
}
