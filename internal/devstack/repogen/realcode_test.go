package repogen

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tinyRealSpec takes archive/tar and archive/zip of the toolchain's
// sources: 100 files, text and binary (zip test files).
func tinyRealSpec(t *testing.T) RealSpec {
	t.Helper()
	root, err := goSourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	return RealSpec{Root: filepath.Join(root, "archive"), Commits: 400, FilesPerCommit: 2, MergeEvery: 15, Releases: 2, Tags: 3, Seed: 5}
}

func TestRealCodeShape(t *testing.T) {
	spec := tinyRealSpec(t)
	dir := filepath.Join(t.TempDir(), "real.git")
	info, err := RealCode(dir, spec)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"commits on all refs", gitOut(t, dir, "rev-list", "--count", "--all"), "400"},
		{"merges", gitOut(t, dir, "rev-list", "--count", "--merges", "--all"), strconv.Itoa(info.Merges)},
		{"main's first parents", gitOut(t, dir, "rev-list", "--count", "--first-parent", "main"), strconv.Itoa(len(info.Commits))},
		{"head", gitOut(t, dir, "rev-parse", "main"), info.Head},
		{"root", gitOut(t, dir, "rev-list", "--max-parents=0", "--all"), info.Commits[0]},
		{"v1.1.0 is annotated", gitOut(t, dir, "cat-file", "-t", "refs/tags/v1.1.0"), "tag"},
		{"v1.2.1 is on its release branch", gitOut(t, dir, "rev-parse", "v1.2.1^{commit}"), gitOut(t, dir, "rev-parse", "release-branch.v1.2")},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
	if info.Merges == 0 {
		t.Error("no merges")
	}
	if n := len(info.Commits); n < 300 || n >= 400 {
		t.Errorf("%d commits on main's first-parent line of 400", n)
	}
	var names []string
	for name, h := range info.Refs {
		names = append(names, name)
		if got := gitOut(t, dir, "rev-parse", name+"^{commit}"); got != h {
			t.Errorf("%s = %s, info says %s", name, got, h)
		}
	}
	for _, want := range []string{"refs/heads/main", "refs/heads/topic", "refs/heads/release-branch.v1.1", "refs/heads/release-branch.v1.2",
		"refs/tags/v1.1.0", "refs/tags/v1.1.1", "refs/tags/v1.2.0", "refs/tags/v1.2.1", "refs/tags/v0.1.0"} {
		if _, ok := info.Refs[want]; !ok {
			t.Errorf("no %s in %v", want, names)
		}
	}
	if len(info.Refs) != 2+2*3+3 { // main, topic; per release a branch and two tags; the tags
		t.Errorf("refs %v", names)
	}

	// Every blob is made of its file's real lines; most files have several
	// versions, and some are shorter than the real file (introduced as a
	// prefix, or with a block deleted).
	blobs := allBlobs(t, dir)
	var size int64
	versions := map[string]int{}
	partial := 0
	for _, b := range blobs {
		size += int64(len(b.content))
		versions[b.path]++
		real, err := os.ReadFile(filepath.Join(spec.Root, b.path))
		if err != nil {
			t.Fatalf("blob at %s: %v", b.path, err)
		}
		lines := map[string]bool{}
		for _, l := range strings.Split(string(real), "\n") {
			lines[l] = true
		}
		for _, l := range strings.Split(string(b.content), "\n") {
			if !lines[l] {
				t.Fatalf("blob at %s has a line of no version of the file: %q", b.path, l)
			}
		}
		if len(b.content) < len(real) {
			partial++
		}
	}
	if len(blobs) != info.Blobs || size != info.BlobBytes || len(versions) != info.Paths || info.Paths != info.Sources {
		t.Errorf("%d blobs (%d bytes) at %d paths, info says %d (%d bytes) at %d paths of %d",
			len(blobs), size, len(versions), info.Blobs, info.BlobBytes, info.Paths, info.Sources)
	}
	most := 0
	for _, n := range versions {
		most = max(most, n)
	}
	if most < 10 || partial < len(blobs)/2 {
		t.Errorf("the most edited file has %d versions, %d of %d blobs are partial", most, partial, len(blobs))
	}
	if n := gitOut(t, dir, "count-objects", "-v"); !strings.Contains(n, "count: 0") || !strings.Contains(n, "packs: 1") {
		t.Errorf("not packed:\n%s", n)
	}
}

type pathBlob struct {
	path    string
	content []byte
}

// allBlobs reads every blob of the repository with the first path it is
// met at.
func allBlobs(t *testing.T, dir string) []pathBlob {
	t.Helper()
	objects := gitOut(t, dir, "rev-list", "--objects", "--all")
	cmd := exec.Command("git", "--git-dir="+dir, "cat-file", "--batch=%(objecttype) %(objectsize) %(rest)")
	cmd.Stdin = strings.NewReader(objects + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var blobs []pathBlob
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		hdr, err := r.ReadString('\n')
		if err == io.EOF {
			return blobs
		}
		typ, rest, _ := strings.Cut(strings.TrimSuffix(hdr, "\n"), " ")
		size, path, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(size)
		if err != nil {
			t.Fatalf("cat-file header %q", hdr)
		}
		content := make([]byte, n+1) // and the newline after
		if _, err := io.ReadFull(r, content); err != nil {
			t.Fatal(err)
		}
		if typ == "blob" {
			blobs = append(blobs, pathBlob{path, content[:n]})
		}
	}
}

func TestRealCodeDeterministic(t *testing.T) {
	spec := tinyRealSpec(t)
	spec.Commits = 120
	var heads []map[string]string
	for _, seed := range []int64{5, 5, 6} {
		spec.Seed = seed
		info, err := RealCode(filepath.Join(t.TempDir(), "real.git"), spec)
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, info.Refs)
	}
	if fmt.Sprint(heads[0]) != fmt.Sprint(heads[1]) {
		t.Errorf("same spec, different refs:\n%v\n%v", heads[0], heads[1])
	}
	if heads[0]["refs/heads/main"] == heads[2]["refs/heads/main"] {
		t.Error("different seeds, same main")
	}
}

func TestCachedRealCode(t *testing.T) {
	spec := tinyRealSpec(t)
	spec.Commits = 50
	cache := t.TempDir()
	var dirs []string
	for i, want := range []bool{false, true} {
		dir, info, err := CachedRealCode(cache, spec)
		if err != nil {
			t.Fatal(err)
		}
		if info.Cached != want || gitOut(t, dir, "rev-parse", "main") != info.Head {
			t.Errorf("call %d: cached %t, head %s", i, info.Cached, info.Head)
		}
		dirs = append(dirs, dir)
	}
	if dirs[0] != dirs[1] {
		t.Errorf("two repositories for one spec: %v", dirs)
	}
	spec.Seed++
	other, info, err := CachedRealCode(cache, spec)
	if err != nil || info.Cached || other == dirs[0] {
		t.Fatalf("another spec: %s, cached %t, %v", other, info.Cached, err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 1 {
		t.Errorf("the cache keeps %d entries, want the newest only", len(ents))
	}
}

func TestRealSpecErrors(t *testing.T) {
	for _, s := range []RealSpec{
		{},
		{Commits: 10, FilesPerCommit: -1},
		{Commits: 10, Root: filepath.Join(t.TempDir(), "none")},
		{Commits: 10, Root: t.TempDir()}, // no files
	} {
		if _, err := RealCode(filepath.Join(t.TempDir(), "r.git"), s); err == nil {
			t.Errorf("spec %+v accepted", s)
		}
	}
}

// BlobBytes steers the corpus's size either way from what the seed alone
// gives.
func TestRealCodeBlobBytes(t *testing.T) {
	spec := tinyRealSpec(t)
	size := func(aim int64) int64 {
		spec.BlobBytes = aim
		info, err := RealCode(filepath.Join(t.TempDir(), "real.git"), spec)
		if err != nil {
			t.Fatal(err)
		}
		return info.BlobBytes
	}
	natural := size(0)
	for _, c := range []struct {
		aim      int64
		min, max float64 // of natural
	}{
		{natural / 2, 0, 0.8},
		{natural * 2, 1.5, 2.5},
	} {
		got := size(c.aim)
		if float64(got) < c.min*float64(natural) || float64(got) > c.max*float64(natural) {
			t.Errorf("aiming at %d bytes (%d without): %d", c.aim, natural, got)
		}
		t.Logf("aiming at %d bytes (%d without): %d", c.aim, natural, got)
	}
}
