package gitfleet

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// listedPackage is what `go list -json` says of a package, and what its
// test files' package comment says (for a package of tests only).
type listedPackage struct {
	ImportPath, Name, Dir, Doc string
	GoFiles, TestGoFiles       []string
	testDoc                    string
}

// packageDocProblems says which packages lack the comment that says what
// they own: every package with Go files has one, starting "Package <name>"
// (a command's, "Command <name>"), as go doc shows it; a package of tests
// only has one in a test file.
func packageDocProblems(pkgs []listedPackage) []string {
	var out []string
	for _, p := range pkgs {
		doc, where := p.Doc, "doc.go"
		if len(p.GoFiles) == 0 {
			if len(p.TestGoFiles) == 0 {
				continue
			}
			doc, where = p.testDoc, "a test file"
		}
		want := "Package " + p.Name + " "
		if p.Name == "main" {
			want = "Command "
		}
		switch {
		case strings.TrimSpace(doc) == "":
			out = append(out, fmt.Sprintf("%s has no package comment (write one in %s: what it owns, its invariants)", p.ImportPath, where))
		case !strings.HasPrefix(doc, want):
			out = append(out, fmt.Sprintf("%s: its package comment starts %.30q, not %q", p.ImportPath, doc, want))
		}
	}
	return out
}

// Every package of the module says what it owns: go doc shows it.
func TestEveryPackageHasADoc(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(p.GoFiles) == 0 {
			// go list reads package comments from non-test files only.
			for _, f := range p.TestGoFiles {
				pf, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
				if err != nil {
					t.Fatal(err)
				}
				if pf.Doc != nil {
					p.testDoc = pf.Doc.Text()
				}
			}
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, p := range packageDocProblems(pkgs) {
		t.Error(p)
	}
}

// The check fails on a package without its comment, or with another's.
func TestPackageDocCheckFailsWithoutADoc(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkg  listedPackage
		want string // "" for none
	}{
		{"documented", listedPackage{ImportPath: "m/a", Name: "a", Doc: "Package a owns x.", GoFiles: []string{"a.go"}}, ""},
		{"a command", listedPackage{ImportPath: "m/cmd", Name: "main", Doc: "Command cmd does y.", GoFiles: []string{"main.go"}}, ""},
		{"tests only, documented", listedPackage{ImportPath: "m/t", Name: "t", TestGoFiles: []string{"t_test.go"}, testDoc: "Package t holds tests.\n"}, ""},
		{"no files", listedPackage{ImportPath: "m/none", Name: "none"}, ""},
		{"no comment", listedPackage{ImportPath: "m/b", Name: "b", GoFiles: []string{"b.go"}}, "m/b has no package comment"},
		{"tests only, no comment", listedPackage{ImportPath: "m/t", Name: "t", TestGoFiles: []string{"t_test.go"}}, "write one in a test file"},
		{"another package's comment", listedPackage{ImportPath: "m/c", Name: "c", Doc: "Package a owns x.", GoFiles: []string{"c.go"}}, `not "Package c "`},
		{"a comment that is no package comment", listedPackage{ImportPath: "m/d", Name: "d", Doc: "TODO.", GoFiles: []string{"d.go"}}, `not "Package d "`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := packageDocProblems([]listedPackage{tc.pkg})
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("problems %q, want one saying %q", got, tc.want)
			}
		})
	}
}
