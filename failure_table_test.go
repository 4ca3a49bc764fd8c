package gitfleet

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The failure table of docs/architecture.md (§2, "Failure model") says, for
// each fault, which tests prove what it promises, in its "proven by"
// column. This file checks that column against the module's tests.
//
// The column's convention: test names in backquotes, `TestName`, or
// `pkg.TestName` where the name alone is not unique (pkg is the last element
// of the package's directory), or `TestName/case` for one case of a
// table-driven test, as `go test -run` spells it (spaces as underscores); a
// note may follow in words. A row no test proves says so: its cell starts
// with "none: known gap". Every test or benchmark named anywhere in a row
// (its prose too) must exist.

// failureTableColumn is the header of the column naming the proofs.
const failureTableColumn = "proven by"

// knownGap starts the cell of a row that no test proves.
const knownGap = "none: known gap"

// testFunc is one `func TestX(` (or BenchmarkX) of a _test.go file.
type testFunc struct {
	dir  string // the package's directory, relative to the module root, slash-separated
	file string // the file's text, where a named case is looked for
}

// testIndex maps a test function's name to where it is defined.
type testIndex map[string][]testFunc

var testFuncRE = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)[A-Za-z0-9_]*)\(`)

// moduleTests reads every _test.go file under root (testdata and hidden
// directories left out) for its test and benchmark functions.
func moduleTests(t *testing.T, root string) testIndex {
	t.Helper()
	idx := testIndex{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range testFuncRE.FindAllStringSubmatch(string(b), -1) {
			idx[m[1]] = append(idx[m[1]], testFunc{dir: filepath.ToSlash(dir), file: string(b)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// failureTableStats counts the table's rows by what proves them.
type failureTableStats struct {
	rows, proven, gaps int
}

// testNameRE finds a backquoted test or benchmark name, with an optional
// package before it and an optional case after it.
var testNameRE = regexp.MustCompile("`(?:([a-z][a-z0-9_]*)\\.)?((?:Test|Benchmark)[A-Za-z0-9_]*)(?:/([^`]+))?`")

// unescapedPipe splits a table row into cells: `\|` inside a cell is text.
var unescapedPipe = regexp.MustCompile(`(^|[^\\])\|`)

func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	var cells []string
	last := 0
	for _, m := range unescapedPipe.FindAllStringIndex(line, -1) {
		end := m[1] - 1 // the pipe itself
		cells = append(cells, line[last:end])
		last = m[1]
	}
	cells = append(cells, line[last:])
	// A row starts and ends with a pipe: drop the empty ends.
	if len(cells) >= 2 && strings.TrimSpace(cells[0]) == "" && strings.TrimSpace(cells[len(cells)-1]) == "" {
		cells = cells[1 : len(cells)-1]
	}
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// checkFailureTable reads the failure table out of the architecture
// document and checks every row against idx: the errors name the row (its
// line and its first words) and what is wrong with it.
func checkFailureTable(doc string, idx testIndex) (failureTableStats, []error) {
	var st failureTableStats
	var errs []error
	lines := strings.Split(doc, "\n")
	heading := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "#") && strings.TrimSpace(strings.TrimLeft(l, "#")) == "Failure model" {
			heading = i
			break
		}
	}
	if heading < 0 {
		return st, []error{fmt.Errorf(`no "Failure model" heading`)}
	}
	header := -1
	for i := heading + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "#") {
			break
		}
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "|") {
			header = i
			break
		}
	}
	if header < 0 {
		return st, []error{fmt.Errorf(`no table under "Failure model"`)}
	}
	cols := splitRow(lines[header])
	col := -1
	for i, c := range cols {
		if strings.EqualFold(c, failureTableColumn) {
			col = i
		}
	}
	if col < 0 {
		return st, []error{fmt.Errorf("line %d: the failure table has no %q column (columns: %q)", header+1, failureTableColumn, cols)}
	}
	for i := header + 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		st.rows++
		cells := splitRow(lines[i])
		row := fmt.Sprintf("line %d (%.50s)", i+1, cells[0])
		if len(cells) != len(cols) {
			errs = append(errs, fmt.Errorf("%s: %d cells, the header has %d (a pipe in a cell is written \\|)", row, len(cells), len(cols)))
			continue
		}
		// Every name in the row exists, the proofs' and the prose's.
		for _, c := range cells {
			for _, m := range testNameRE.FindAllStringSubmatch(c, -1) {
				if err := idx.check(m[1], m[2], m[3], c == cells[col]); err != nil {
					errs = append(errs, fmt.Errorf("%s: %v", row, err))
				}
			}
		}
		proof := cells[col]
		if strings.HasPrefix(proof, knownGap) {
			st.gaps++
			continue
		}
		proven := false
		for _, m := range testNameRE.FindAllStringSubmatch(proof, -1) {
			proven = proven || strings.HasPrefix(m[2], "Test")
		}
		if !proven {
			errs = append(errs, fmt.Errorf("%s: %q names no test and does not start %q", row, proof, knownGap))
			continue
		}
		st.proven++
	}
	if st.rows == 0 {
		errs = append(errs, fmt.Errorf("line %d: the failure table has no rows", header+1))
	}
	return st, errs
}

// check says whether the test name (with its package and case, if given)
// exists. A proof must be unambiguous: a name several packages define
// needs its package.
//
// A case is looked for, best effort, as a string literal in the test's
// file: the name as written, or with its underscores as spaces (t.Run's
// names are spelt so on the command line). That finds the cases of a
// table-driven test whose names are literals, which is how this module
// writes them.
func (idx testIndex) check(pkg, name, sub string, proof bool) error {
	var found []testFunc
	for _, f := range idx[name] {
		if pkg == "" || pkg == f.dir || strings.HasSuffix(f.dir, "/"+pkg) {
			found = append(found, f)
		}
	}
	full := name
	if pkg != "" {
		full = pkg + "." + name
	}
	switch {
	case len(found) == 0 && len(idx[name]) > 0:
		return fmt.Errorf("%s: %s is not in package %s (it is in %s)", full, name, pkg, dirs(idx[name]))
	case len(found) == 0:
		return fmt.Errorf("%s: no such test in the module", full)
	case len(found) > 1 && proof:
		return fmt.Errorf("%s: defined in %s: name the package (pkg.%s)", full, dirs(found), name)
	}
	if sub == "" {
		return nil
	}
	for _, f := range found {
		for _, s := range []string{sub, strings.ReplaceAll(sub, "_", " ")} {
			if strings.Contains(f.file, fmt.Sprintf("%q", s)) {
				return nil
			}
		}
	}
	return fmt.Errorf("%s/%s: no case %q in the file of %s", full, sub, sub, name)
}

func dirs(fs []testFunc) string {
	var ds []string
	for _, f := range fs {
		if f.dir == "." {
			ds = append(ds, "the root package")
		} else {
			ds = append(ds, f.dir)
		}
	}
	return strings.Join(ds, ", ")
}

// Every row of the failure table names the tests that prove it, or says
// no test does, and every test the table names exists in the module.
func TestFailureTableNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	st, errs := checkFailureTable(string(doc), moduleTests(t, "."))
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("failure table: %d rows, %d proven by tests, %d known gaps", st.rows, st.proven, st.gaps)
}

// The check fails on what it is for: a synthetic table, against a
// synthetic index, with one fault a row.
func TestFailureTableCheckFailsOnBadRows(t *testing.T) {
	idx := testIndex{
		"TestA":      {{dir: "activities", file: `t.Run("a case", nil)`}},
		"TestDecide": {{dir: "internal/domain/blame"}, {dir: "internal/domain/decay"}},
		"BenchmarkB": {{dir: "workflows", file: `b.Run("outage", nil)`}},
	}
	const head = "# doc\n\n### Failure model\n\nText.\n\n| cause | class | proven by |\n|---|---|---|\n"
	for _, tc := range []struct {
		name, doc string
		want      string // in the one error; "" for none
		stats     failureTableStats
	}{
		{"proven", head + "| x | y | `TestA` |\n", "", failureTableStats{1, 1, 0}},
		{"a package and a case", head + "| x | y | `activities.TestA/a_case`, `blame.TestDecide` (and a note) |\n", "", failureTableStats{1, 1, 0}},
		{"a known gap", head + "| x \\| z | y | none: known gap (`TestA` shows a part) |\n", "", failureTableStats{1, 0, 1}},
		{"prose names a benchmark's case", head + "| x (`BenchmarkB/outage`) | y | `TestA` |\n", "", failureTableStats{1, 1, 0}},
		{"a misspelt name", head + "| x | y | `TestAA` |\n", "TestAA: no such test", failureTableStats{1, 1, 0}},
		{"a misspelt name in the prose", head + "| x (`TestNope`) | y | `TestA` |\n", "TestNope: no such test", failureTableStats{1, 1, 0}},
		{"a misspelt name in a gap's note", head + "| x | y | none: known gap (`TestNope`) |\n", "TestNope: no such test", failureTableStats{1, 0, 1}},
		{"no test and no gap", head + "| x | y | to do |\n", "names no test", failureTableStats{1, 0, 0}},
		{"an empty cell", head + "| x | y |  |\n", "names no test", failureTableStats{1, 0, 0}},
		{"only a benchmark", head + "| x | y | `BenchmarkB` |\n", "names no test", failureTableStats{1, 0, 0}},
		{"an ambiguous name", head + "| x | y | `TestDecide` |\n", "name the package", failureTableStats{1, 1, 0}},
		{"the wrong package", head + "| x | y | `workflows.TestA` |\n", "not in package workflows", failureTableStats{1, 1, 0}},
		{"no such case", head + "| x | y | `TestA/another_case` |\n", `no case "another_case"`, failureTableStats{1, 1, 0}},
		{"a cell too few", head + "| x | `TestA` |\n", "2 cells, the header has 3", failureTableStats{1, 0, 0}},
		{"no column", "### Failure model\n\n| cause | class |\n|---|---|\n| x | y |\n", `no "proven by" column`, failureTableStats{}},
		{"no rows", head, "no rows", failureTableStats{}},
		{"no table", "### Failure model\n\nText.\n\n## 3. Next\n\n| a |\n", "no table", failureTableStats{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, errs := checkFailureTable(tc.doc, idx)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want)):
				t.Errorf("errors %v, want one saying %q", errs, tc.want)
			}
			if st != tc.stats {
				t.Errorf("stats %+v, want %+v", st, tc.stats)
			}
		})
	}
}
