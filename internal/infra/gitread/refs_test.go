package gitread

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

func TestReadRefs(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("HEAD", "ref: refs/heads/main\n")
	write("refs/heads/main", a+"\n")
	write("refs/heads/crlf", b+"\r\n")
	write("refs/heads/upper", strings.ToUpper(b))
	write("refs/heads/empty", "")
	write("refs/heads/blank", "\n")
	write("refs/heads/garbage", "not an id\n")
	write("refs/heads/null", strings.Repeat("0", 40)+"\n")
	write("refs/heads/long", a+"0\n")
	write("refs/.gitkeep", "")
	write("refs/heads/main.lock", a+"\n")
	write("refs/heads/alias", "ref: refs/heads/main\n")
	write("refs/heads/alias2", "ref:refs/heads/alias\n")
	write("refs/heads/dangling", "ref: refs/heads/nowhere\n")
	write("refs/heads/loop", "ref: refs/heads/loop\n")
	write("refs/heads/badtarget", "ref: HEAD\n")
	write("refs/tags/packed-and-loose", b+"\n")
	write("packed-refs", "# pack-refs with: peeled fully-peeled sorted \n"+
		"^"+a+"\n"+ // stray: no ref above
		a+" refs/tags/packed-and-loose\n"+
		a+" refs/tags/v1\n"+
		"^"+b+"\n"+ // v1's peeled value
		"junk\n"+
		a+"\n"+
		a+" refs/tags/two words\n"+
		a+"  refs/tags/two-spaces\n"+
		strings.Repeat("0", 40)+" refs/tags/null\n"+
		a[:39]+"g refs/tags/not-hex\n"+
		b+" refs/heads/packed\r\n"+
		"\n")
	l, err := ReadRefs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range l.Refs {
		got = append(got, r.Name+"="+r.Hash.String()[:1])
	}
	want := "refs/heads/crlf=b refs/heads/main=a refs/heads/packed=b refs/heads/upper=b refs/tags/packed-and-loose=b refs/tags/v1=a"
	if strings.Join(got, " ") != want {
		t.Errorf("refs\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	wantIgnored := map[string]int{
		IgnoredEmptyRef:       1, // empty; "blank" holds a newline: malformed
		IgnoredMalformedRef:   5, // blank, garbage, null, long, a symbolic ref to HEAD
		IgnoredBadName:        2, // .gitkeep, main.lock
		IgnoredDanglingSymref: 2, // dangling, loop
		IgnoredPackedRefsLine: 7, // stray ^, junk, id alone, two words, two spaces, null, not hex
	}
	for reason, n := range wantIgnored {
		if l.Ignored[reason] != n {
			t.Errorf("ignored %q: %d, want %d (all: %v)", reason, l.Ignored[reason], n, l.Ignored)
		}
	}
	for name, want := range map[string]string{"refs/heads/alias": a, "refs/heads/alias2": a, "refs/heads/main": a, "refs/heads/dangling": "", "refs/heads/loop": "", "refs/heads/nothing": ""} {
		h, ok := l.Resolve(name)
		if ok != (want != "") || ok && h != plumbing.NewHash(want) {
			t.Errorf("Resolve(%s) = %s, %t; want %q", name, h, ok, want)
		}
	}

	// No refs at all (an empty repository): nothing, no error.
	empty := t.TempDir()
	if l, err := ReadRefs(empty); err != nil || len(l.Refs) != 0 || len(l.Ignored) != 0 {
		t.Errorf("empty: %+v, %v", l, err)
	}
	// A refs directory that cannot be read is an error.
	if os.Getuid() != 0 {
		if err := os.Chmod(filepath.Join(dir, "refs", "heads"), 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(filepath.Join(dir, "refs", "heads"), 0o755)
		if _, err := ReadRefs(dir); err == nil || !os.IsPermission(err) && !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("unreadable refs/heads: %v", err)
		}
	}
}

func TestValidRefName(t *testing.T) {
	for name, want := range map[string]bool{
		"refs/heads/main": true, "refs/tags/v1.0": true, "refs/heads/feature/x-y_z": true, "refs/heads/@": true,
		"HEAD": false, "refs/": false, "refs/heads/": false, "refs//x": false, "refs/heads/.hidden": false,
		"refs/heads/x.lock": false, "refs/heads/a..b": false, "refs/heads/a b": false, "refs/heads/a~1": false,
		"refs/heads/a^": false, "refs/heads/a:b": false, "refs/heads/a?": false, "refs/heads/a*": false,
		"refs/heads/a[": false, "refs/heads/a\\b": false, "refs/heads/a@{1}": false, "refs/heads/a.": false,
		"refs/heads/\x01": false, "refs/heads/\x7f": false,
	} {
		if got := ValidRefName(name); got != want {
			t.Errorf("ValidRefName(%q) = %t, want %t", name, got, want)
		}
	}
}
