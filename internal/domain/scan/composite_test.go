package scan

import (
	"fmt"
	"strings"
	"testing"
)

// compositeRules: "pass" is reported only near a match of "user", which is
// skipReport, within the bounds in req (TOML lines of a [[rules.required]]).
func compositeRules(req string) string {
	return `
[[rules]]
id = "pass"
regex = '''pass_([a-z0-9]{8})'''
secretGroup = 1
keywords = ["pass_"]
[[rules.required]]
id = "user"
` + req + `
[[rules]]
id = "user"
regex = '''user_[a-z0-9]{6}'''
keywords = ["user_"]
skipReport = true
[[rules.allowlists]]
stopwords = ["nobody"]
`
}

// Secrets are built at run time (see helpers_test.go).
var (
	cg   = newGen(11)
	pass = "pass_" + cg.s(lowerChars, 8)
	user = "user_" + cg.s(lowerChars, 6)
)

// at puts s at 1-based column col of a line.
func at(col int, s string) string { return strings.Repeat(" ", col-1) + s }

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// positions renders findings as rule@line:column.
func positions(fs []Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s@%d:%d", f.RuleID, f.Line, f.Column))
	}
	return strings.Join(out, " ")
}

func TestCompositeRules(t *testing.T) {
	cases := []struct {
		name, req, path, text string
		want                  string // positions of the findings
	}{
		{"no bounds: anywhere in the blob", "", "a.txt", lines(at(1, pass), "", "", "", at(30, user)), "pass@1:6"},
		{"no bounds: the required rule has no match", "", "a.txt", lines(at(1, pass)), ""},
		{"within lines: next line", "withinLines = 1", "a.txt", lines(at(1, pass), at(20, user)), "pass@1:6"},
		{"within lines: previous line", "withinLines = 1", "a.txt", lines(at(20, user), at(1, pass)), "pass@2:6"},
		{"within lines: two lines away", "withinLines = 1", "a.txt", lines(at(1, pass), "", at(1, user)), ""},
		{"within lines 0: same line", "withinLines = 0", "a.txt", lines(at(1, pass) + " " + user), "pass@1:6"},
		{"within columns: 3 columns right, other line", "withinColumns = 3", "a.txt", lines(at(5, pass), "", "", at(8, user)), "pass@1:10"},
		{"within columns: 4 columns right", "withinColumns = 3", "a.txt", lines(at(5, pass), at(9, user)), ""},
		{"within columns: 3 columns left", "withinColumns = 3", "a.txt", lines(at(5, pass), at(2, user)), "pass@1:10"},
		{"columns count from the match, not the secret", "withinColumns = 0", "a.txt", lines(at(5, pass), at(5, user)), "pass@1:10"},
		{"the secret's column is too far", "withinColumns = 0", "a.txt", lines(at(5, pass), at(10, user)), ""},
		{"both: inside the rectangle", "withinLines = 1\nwithinColumns = 2", "a.txt", lines(at(5, pass), at(7, user)), "pass@1:10"},
		{"both: lines ok, columns not", "withinLines = 1\nwithinColumns = 2", "a.txt", lines(at(5, pass), at(8, user)), ""},
		{"both: columns ok, lines not", "withinLines = 1\nwithinColumns = 2", "a.txt", lines(at(5, pass), "", at(5, user)), ""},
		{"only the primary findings near a required one", "withinLines = 0", "a.txt", lines(pass+" "+user, pass, user+" "+pass), "pass@1:6 pass@3:18"},
		{"the required rule's allowlist applies", "", "a.txt", lines(pass, "user_nobody"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTestScanner(t, mustLoad(t, compositeRules(c.req)))
			res := s.Scan(c.path, []byte(c.text), "")
			if got := positions(res.Findings); got != c.want {
				t.Errorf("findings %q, want %q\n%s", got, c.want, c.text)
			}
			for _, f := range res.Findings {
				assertNoSecret(t, f, pass[5:])
			}
		})
	}
}

// A required rule runs as gitleaks runs it: with its own path and
// allowlists, but whether or not its keywords occur, and without its own
// required rules.
func TestCompositeRequiredRuleSemantics(t *testing.T) {
	g := newGen(12)
	pin := g.s(digitChars, 6)
	tok := "tok_" + g.s(lowerChars, 8)
	cases := []struct {
		name, toml, path, text, want string
	}{
		{"keywords absent: the required rule still runs", `
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
keywords = ["pass_"]
[[rules.required]]
id = "pin"
[[rules]]
id = "pin"
regex = '''\b[0-9]{6}\b'''
keywords = ["pin="]
`, "a.txt", lines(pass, pin), "pass@1:1"},
		{"a required rule that is reported too, not hit by its keywords, is not reported", `
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
keywords = ["pass_"]
[[rules.required]]
id = "pin"
[[rules]]
id = "pin"
regex = '''\b[0-9]{6}\b'''
keywords = ["pin="]
`, "a.txt", lines(pass, "pin="+pin), "pass@1:1 pin@2:5"},
		{"the required rule's path applies", `
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
[[rules.required]]
id = "user"
[[rules]]
id = "user"
regex = '''user_[a-z0-9]{6}'''
path = '''\.env$'''
skipReport = true
`, "a.txt", lines(pass, user), ""},
		{"a path-only required rule: the path matches", `
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
[[rules.required]]
id = "envfile"
[[rules]]
id = "envfile"
path = '''\.env$'''
skipReport = true
`, "prod.env", lines(pass), "pass@1:1"},
		{"a path-only required rule: it does not", `
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
[[rules.required]]
id = "envfile"
[[rules]]
id = "envfile"
path = '''\.env$'''
skipReport = true
`, "prod.txt", lines(pass), ""},
		{"a path-only required rule is at line 0, as in gitleaks", `
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
[[rules.required]]
id = "envfile"
withinLines = 1
[[rules]]
id = "envfile"
path = '''\.env$'''
skipReport = true
`, "prod.env", lines(pass, pass), "pass@1:1"},
		{"every required rule must match", `
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
[[rules.required]]
id = "user"
[[rules.required]]
id = "tok"
[[rules]]
id = "user"
regex = '''user_[a-z0-9]{6}'''
skipReport = true
[[rules]]
id = "tok"
regex = '''tok_[a-z]{8}'''
skipReport = true
`, "a.txt", lines(pass, user), ""},
		{"a composite rule required by another counts with all its findings", `
[[rules]]
id = "tok"
regex = '''tok_[a-z]{8}'''
[[rules.required]]
id = "pass"
[[rules]]
id = "pass"
regex = '''pass_[a-z]{8}'''
[[rules.required]]
id = "user"
[[rules]]
id = "user"
regex = '''user_[a-z0-9]{6}'''
`, "a.txt", lines(tok, pass), "tok@1:1"},
		{"a path-only composite rule ignores its required rules, as in gitleaks", `
[[rules]]
id = "envfile"
path = '''\.env$'''
[[rules.required]]
id = "user"
[[rules]]
id = "user"
regex = '''user_[a-z0-9]{6}'''
skipReport = true
`, "prod.env", "nothing here\n", "envfile@0:0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTestScanner(t, mustLoad(t, c.toml))
			if got := positions(s.Scan(c.path, []byte(c.text), "").Findings); got != c.want {
				t.Errorf("findings %q, want %q\n%s", got, c.want, c.text)
			}
		})
	}
}

func TestSkipReport(t *testing.T) {
	rs := mustLoad(t, compositeRules(""))
	s := newTestScanner(t, rs)
	var ran []string
	s.onRegex = func(id string) { ran = append(ran, id) }

	// Alone, a skipReport rule finds nothing, and does not even run.
	if got := s.Scan("a.txt", []byte(lines(user, user)), "").Findings; len(got) != 0 {
		t.Errorf("skipReport rule reported: %s", positions(got))
	}
	if strings.Join(ran, ",") != "" {
		t.Errorf("regexes ran: %v", ran)
	}
	// As a required rule it runs once the primary rule has found something.
	ran = nil
	if got := positions(s.Scan("a.txt", []byte(lines(user, pass, user)), "").Findings); got != "pass@2:6" {
		t.Errorf("findings %q", got)
	}
	if strings.Join(ran, ",") != "pass,user" {
		t.Errorf("regexes ran: %v", ran)
	}
	// Skipped blobs run path rules only; composite rules need content.
	if res := s.Scan("a.bin", []byte("\x00"+pass+user), ""); res.Skipped != SkipBinary || len(res.Findings) != 0 {
		t.Errorf("binary blob: %+v", res)
	}
}

// The scratch state of composite rules does not leak between scans.
func TestCompositeStateResets(t *testing.T) {
	s := newTestScanner(t, mustLoad(t, compositeRules("withinLines = 0")))
	for i := 0; i < 3; i++ {
		if got := positions(s.Scan("a.txt", []byte(lines(pass+" "+user)), "").Findings); got != "pass@1:6" {
			t.Fatalf("scan %d: with a user: %q", i, got)
		}
		if got := positions(s.Scan("a.txt", []byte(lines("x", pass)), "").Findings); got != "" {
			t.Fatalf("scan %d: without: %q", i, got)
		}
	}
}
