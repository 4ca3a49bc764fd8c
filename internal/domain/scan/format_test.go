package scan

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// Every key of gitleaks v8.30's configuration format loads, with its
// meaning.
func TestGitleaksKeysLoad(t *testing.T) {
	const rule = "[[rules]]\nid = 'r'\nregex = '''r_([a-z]{8})'''\nkeywords = ['r_']\n"
	cases := []struct {
		name, toml string
		check      func(t *testing.T, rs *RuleSet)
	}{
		{"minVersion", "minVersion = 'v8.25.0'\n" + rule, func(t *testing.T, rs *RuleSet) {
			if rs.MinVersion() != "v8.25.0" || len(rs.Warnings()) != 0 {
				t.Errorf("minVersion %q, warnings %q", rs.MinVersion(), rs.Warnings())
			}
		}},
		{"top-level description", "description = 'ours'\n" + rule, nil},
		{"title", "title = 'ours'\n" + rule, func(t *testing.T, rs *RuleSet) {
			if rs.Title() != "ours" {
				t.Errorf("title %q", rs.Title())
			}
		}},
		{"extend url is ignored with a warning", "[extend]\nurl = 'https://example.com/x.toml'\n" + rule, func(t *testing.T, rs *RuleSet) {
			wantWarning(t, rs, "url")
		}},
		{"global [allowlist], every key", rule + `
[allowlist]
description = "d"
condition = "AND"
regexTarget = "line"
regexes = ['''x''']
stopwords = ["Dummy"]
paths = ['''^test/''']
commits = ["ABC123"]
`, func(t *testing.T, rs *RuleSet) {
			a := rs.Allowlists()[0]
			if a.Condition != "AND" || a.RegexTarget != "line" || a.StopWords[0] != "dummy" || a.Commits[0] != "ABC123" || a.Paths[0] != "^test/" || a.Regexes[0] != "x" {
				t.Errorf("allowlist %+v", a)
			}
		}},
		{"global [[allowlists]] with targetRules", rule + "[[allowlists]]\ntargetRules = ['r']\nstopwords = ['x']\n[[allowlists]]\npaths = ['y']\n", func(t *testing.T, rs *RuleSet) {
			if g := rs.Allowlists(); len(g) != 2 || g[0].TargetRules[0] != "r" {
				t.Errorf("allowlists %+v", g)
			}
		}},
		{"condition spellings", rule + "[[allowlists]]\ncondition = '&&'\nstopwords = ['x']\n[[allowlists]]\ncondition = '||'\nstopwords = ['y']\n", func(t *testing.T, rs *RuleSet) {
			if g := rs.Allowlists(); g[0].Condition != "AND" || g[1].Condition != "OR" {
				t.Errorf("conditions %q %q", g[0].Condition, g[1].Condition)
			}
		}},
		{"rule: every key", `
[[rules]]
id = "full"
description = "all of it"
regex = '''full_([a-z]{8})'''
secretGroup = 1
entropy = 2.5
keywords = ["full_"]
path = '''\.go$'''
tags = ["a", "b"]
skipReport = true
[rules.allowlist]
regexes = ['''^aaaa''']
[[rules.allowlists]]
stopwords = ["zzz"]
[[rules.required]]
id = "other"
withinLines = 2
withinColumns = 30
[[rules]]
id = "other"
regex = '''oth_[a-z]{4}'''
`, func(t *testing.T, rs *RuleSet) {
			r := rs.Rules()[0]
			if r.ID != "full" || r.SecretGroup != 1 || r.Entropy != 2.5 || r.Path != `\.go$` || strings.Join(r.Tags, ",") != "a,b" ||
				!r.SkipReport || len(r.Allowlists) != 2 || len(r.Required) != 1 {
				t.Fatalf("rule %+v", r)
			}
			if q := r.Required[0]; q.ID != "other" || *q.WithinLines != 2 || *q.WithinColumns != 30 {
				t.Errorf("required %+v", q)
			}
		}},
		{"required without bounds", rule + "[[rules.required]]\nid = 'p'\n[[rules]]\nid = 'p'\nregex = 'p'\n", func(t *testing.T, rs *RuleSet) {
			if q := rs.Rules()[1].Required[0]; q.WithinLines != nil || q.WithinColumns != nil {
				t.Errorf("required %+v", q)
			}
		}},
		{"path-only rule", "[[rules]]\nid = 'env'\npath = '''\\.env$'''\ntags = ['file']\n", func(t *testing.T, rs *RuleSet) {
			if r := rs.Rules()[0]; r.Regex != "" || r.Path == "" {
				t.Errorf("rule %+v", r)
			}
		}},
		{"keys match case-insensitively, as in gitleaks", "[[rules]]\nID = 'c'\nRegex = 'c_[0-9]'\nSkipReport = true\nsecretgroup = 0\n", func(t *testing.T, rs *RuleSet) {
			if r := rs.Rules()[0]; r.ID != "c" || !r.SkipReport {
				t.Errorf("rule %+v", r)
			}
		}},
		{"inline tables", "rules = [{id = 'i', regex = 'i_[0-9]', required = [{id = 'i', withinLines = 0}]}]\n", func(t *testing.T, rs *RuleSet) {
			if q := rs.Rules()[0].Required; len(q) != 1 || *q[0].WithinLines != 0 {
				t.Errorf("required %+v", q)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := mustLoad(t, c.toml)
			if c.check != nil {
				c.check(t, rs)
			}
		})
	}
}

// A key gitleaks does not define is an error that names it and its line.
func TestUnknownKeyNamesKeyAndLine(t *testing.T) {
	const two = "[[rules]]\nid = 'a'\nregex = 'a'\n\n[[rules]]\nid = 'b'\nregex = 'b'\n"
	cases := []struct {
		name, toml string
		want       []string // substrings of the error
	}{
		{"top level", "title = 'x'\nminVersoin = 'v8.0.0'\n" + two, []string{"unknown key minVersoin (line 2)"}},
		{"in the second rule", two + "skipReprot = true\n", []string{`unknown key rules["b"].skipReprot (line 8)`}},
		{"in a rule without id", "[[rules]]\nregex = 'a'\nkeyword = ['a']\n", []string{"rules[0].keyword (line 3)"}},
		{"in a required table", two + "[[rules.required]]\nid = 'a'\nwithinLine = 2\n", []string{`rules["b"].required[0].withinLine (line 10)`}},
		{"in the second allowlist of a rule", two + "[[rules.allowlists]]\nregexes = ['x']\n[[rules.allowlists]]\nregex = ['y']\n", []string{`rules["b"].allowlists[1].regex (line 11)`}},
		{"in the old rule allowlist", two + "[rules.allowlist]\nfiles = ['x']\n", []string{`rules["b"].allowlist.files (line 9)`}},
		{"in a global allowlist", two + "[[allowlists]]\nstopwords = ['x']\n\n[[allowlists]]\npath = ['y']\n", []string{"allowlists[1].path (line 12)"}},
		{"in extend", "# a comment\n[extend]\nuseDefaults = true\n", []string{"extend.useDefaults (line 3)"}},
		{"an unknown table is reported, not its keys", two + "[rules.allowlsit]\nregexes = ['x']\n", []string{`rules["b"].allowlsit (line 8)`}},
		{"after multi-line strings", "[[rules]]\nid = 'm'\ndescription = '''\n[[rules]]\nkeywords = \"\n'''\nregex = \"\"\"\nm\\\n\"\"\"\nkeyword = ['m']\n", []string{`rules["m"].keyword (line 10)`}},
		{"in an inline table", "rules = [\n  {id = 'x', regex = 'x'},\n  {id = 'y', regex = 'y', tag = ['t']},\n]\n", []string{`rules["y"].tag (line 3)`}},
		{"quoted and dotted keys", two + "\"secret group\" = 1\nextra.deep = 2\n", []string{`rules["b"].secret group (line 8)`, `rules["b"].extra.deep (line 9)`}},
		{"CRLF line ends", strings.ReplaceAll(two+"bogus = 1\n", "\n", "\r\n"), []string{`rules["b"].bogus (line 8)`}},
		{"several, in order", "titel = 'x'\n" + two + "secretgroupp = 1\n", []string{"unknown keys titel (line 1), rules[\"b\"].secretgroupp (line 9)"}},
		{"in an extended file", "[extend]\npath = 'base.toml'\n", []string{"base.toml", "rules[\"a\"].regexx (line 3)"}},
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "base.toml"), []byte("[[rules]]\nid = 'a'\nregexx = 'a'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, "rules.toml")
			if err := os.WriteFile(p, []byte(c.toml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(p)
			if err == nil {
				t.Fatalf("LoadFile succeeded, want an error containing %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// locateKeys follows the decoder on real configurations and on TOML's
// corners, so that the lines it gives are trustworthy.
func TestLocateKeysAgreesWithDecoder(t *testing.T) {
	docs := map[string]string{
		"extension.toml": string(extensionTOML),
		"gitleaks.toml":  string(maintainedTOML),
		"corners": "\ufeff# c\n a . \"b c\" . 'd' = 1 # c\n[t]\nx = [ # c\n  1, [2, 3], {y = 4},\n  \"]\" ,\n]\ns = \"\"\"a\n\"\"\"\"\"\nl = '''''x'''''\n" +
			"d = 1979-05-27 07:32:00Z\n[[arr]]\nk = {m = {n = 'p'}}\n[[arr]]\n[arr.sub]\nq = 1\n[[arr.list]]\nr = 2\n",
	}
	for name, doc := range docs {
		var v map[string]any
		md, err := toml.Decode(doc, &v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		locs := locateKeys(doc)
		if !sameKeys(locs, md.Keys()) {
			t.Errorf("%s: locateKeys found %d keys, the decoder %d, or they differ", name, len(locs), len(md.Keys()))
		}
	}
	locs := locateKeys(docs["corners"])
	var got []string
	for _, l := range locs {
		got = append(got, l.name(nil)+"@"+strconv.Itoa(l.line))
	}
	want := "a.b c.d@2 t@3 t.x@4 t.x[2].y@5 t.s@8 t.l@10 t.d@11 arr[0]@12 arr[0].k@13 arr[0].k.m@13 arr[0].k.m.n@13 arr[1]@14 arr[1].sub@15 arr[1].sub.q@16 arr[1].list[0]@17 arr[1].list[0].r@18"
	if strings.Join(got, " ") != want {
		t.Errorf("keys:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestMinVersion(t *testing.T) {
	const rule = "[[rules]]\nid = 'r'\nregex = 'r'\n"
	for _, v := range []string{"v8.25.0", "8.30.1", "v8.30", "v8", "v8.30.1-rc.1", "v7.6.1+build"} {
		rs := mustLoad(t, "minVersion = '"+v+"'\n"+rule)
		if len(rs.Warnings()) != 0 {
			t.Errorf("%s: warnings %q", v, rs.Warnings())
		}
	}
	for _, v := range []string{"v8.31.0", "v9", "8.30.2"} {
		wantWarning(t, mustLoad(t, "minVersion = '"+v+"'\n"+rule), "newer")
	}
	for _, v := range []string{"latest", "v8.x", "8.30.1.2", "v99999999999999999999"} {
		if _, err := Load(strings.NewReader("minVersion = '" + v + "'\n" + rule)); err == nil || !strings.Contains(err.Error(), "minVersion") {
			t.Errorf("%s: err = %v", v, err)
		}
	}
}

func TestGitleaksFormatErrors(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string
	}{
		{"required rule does not exist", "[[rules]]\nid='a'\nregex='a'\n[[rules.required]]\nid='nope'\n", []string{`rule "a"`, `"nope"`, "does not exist"}},
		{"required rule without id", "[[rules]]\nid='a'\nregex='a'\n[[rules.required]]\nwithinLines=1\n", []string{`rule "a"`, "no id"}},
		{"negative withinLines", "[[rules]]\nid='a'\nregex='a'\n[[rules.required]]\nid='a'\nwithinLines=-1\n", []string{"withinLines", "negative"}},
		{"negative withinColumns", "[[rules]]\nid='a'\nregex='a'\n[[rules.required]]\nid='a'\nwithinColumns=-2\n", []string{"withinColumns", "negative"}},
		{"wrong type names the line", "[[rules]]\nid='a'\nregex='a'\nskipReport='yes'\n", []string{"line 4", "skipReport"}},
		{"both useDefault and path", "[extend]\nuseDefault=true\npath='x.toml'\n", []string{"not both"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(c.toml))
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// [extend] merges a rule of the same id into the extended one field by
// field, as gitleaks does.
func TestExtendMergesLikeGitleaks(t *testing.T) {
	dir := t.TempDir()
	base := `
[[rules]]
id = "tok"
description = "base"
regex = '''tok_([a-z0-9]{8})'''
secretGroup = 1
keywords = ["tok_"]
tags = ["base"]
[[rules.allowlists]]
stopwords = ["dummy"]
[[rules]]
id = "helper"
regex = '''hlp_[a-z]{4}'''
skipReport = true
[[rules]]
id = "pair"
regex = '''pair_[a-z]{4}'''
[[rules.required]]
id = "helper"
`
	if err := os.WriteFile(filepath.Join(dir, "base.toml"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	top := `
[extend]
path = "base.toml"
disabledRules = ["generic-api-key"]
[[rules]]
id = "tok"
keywords = ["token"]
tags = ["ours"]
[[rules.allowlists]]
paths = ['''^test/''']
[[rules]]
id = "pair"
skipReport = true
`
	p := filepath.Join(dir, "top.toml")
	if err := os.WriteFile(p, []byte(top), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Rule{}
	for _, r := range rs.Rules() {
		byID[r.ID] = r
	}
	tok := byID["tok"]
	if tok.Description != "base" || tok.Regex != `tok_([a-z0-9]{8})` || tok.SecretGroup != 1 ||
		strings.Join(tok.Keywords, ",") != "tok_,token" || strings.Join(tok.Tags, ",") != "base,ours" || len(tok.Allowlists) != 2 {
		t.Errorf("merged rule %+v", tok)
	}
	if pair := byID["pair"]; pair.SkipReport || len(pair.Required) != 1 {
		t.Errorf("required and skipReport of the extending rule must be ignored, as in gitleaks: %+v", pair)
	}
	wantWarning(t, rs, `"generic-api-key"`)
	wantWarning(t, rs, `rule "pair": required and skipReport are ignored`)

	s := newTestScanner(t, rs)
	secret := "tok_" + newGen(5).s(lowerChars, 8)
	if got := ruleIDs(s.Scan("src/a.txt", []byte(secret), "").Findings); strings.Join(got, ",") != "tok" {
		t.Errorf("findings %v", got)
	}
	if got := s.Scan("test/a.txt", []byte(secret), "").Findings; len(got) != 0 {
		t.Errorf("the extending rule's allowlist does not apply: %v", ruleIDs(got))
	}
}

func TestWarnings(t *testing.T) {
	cases := []struct{ name, toml, want string }{
		{"disabledRules without a base", "[extend]\ndisabledRules = ['x']\n[[rules]]\nid='a'\nregex='a'\n", "no effect"},
		{"unused skipReport rule", "[[rules]]\nid='a'\nregex='a'\n[[rules]]\nid='b'\nregex='b'\nskipReport=true\n", `rule "b" has skipReport`},
		{"required rules of a path-only rule", "[[rules]]\nid='a'\npath='a'\n[[rules.required]]\nid='b'\n[[rules]]\nid='b'\nregex='b'\n", `rule "a" has a path and no regex`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantWarning(t, mustLoad(t, c.toml), c.want)
		})
	}
}

// Allowlist regexes and paths are joined into one regex as gitleaks joins
// them, so that a leading (?i) of one applies to those after it: gitleaks'
// own default allowlists are written with that in mind.
func TestAllowlistPatternsJoinedLikeGitleaks(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "v"
regex = '''val=(\S+)'''
keywords = ["val="]
[[rules.allowlists]]
regexes = ['''(?i)^none$''', '''^\$[A-Z_]+$''']
[[rules.allowlists]]
paths = ['''(?i)\.png$''', '''(?:^|/)vendor/''']
`)
	s := newTestScanner(t, rs)
	for _, c := range []struct {
		path, text string
		found      bool
	}{
		{"a.txt", "val=$Home_Dir", false}, // ^\$[A-Z_]+$ is case-insensitive after (?i)
		{"a.txt", "val=$HOME", false},
		{"a.txt", "val=$home1", true},
		{"Vendor/a.txt", "val=x1", false},
		{"src/a.txt", "val=x1", true},
	} {
		if got := len(s.Scan(c.path, []byte(c.text), "").Findings) > 0; got != c.found {
			t.Errorf("%s %q: found %t, want %t", c.path, c.text, got, c.found)
		}
	}
}

func TestHashCoversGitleaksKeys(t *testing.T) {
	const base = `
[[rules]]
id = "p"
regex = '''p_[a-z]{4}'''
[[rules.allowlists]]
regexes = ['''^a''', '''^b''']
[[rules.required]]
id = "q"
withinLines = 1
[[rules]]
id = "q"
regex = '''q_[a-z]{4}'''
skipReport = true
`
	h := mustLoad(t, base).Hash()
	for name, rep := range map[string][2]string{
		"withinLines":       {"withinLines = 1", "withinLines = 2"},
		"withinColumns":     {"withinLines = 1", "withinLines = 1\nwithinColumns = 1"},
		"required":          {"[[rules.required]]\nid = \"q\"\nwithinLines = 1\n", ""},
		"skipReport":        {"skipReport = true", "skipReport = false"},
		"allowlist regexes": {`regexes = ['''^a''', '''^b''']`, `regexes = ['''^b''', '''^a''']`},
	} {
		text := strings.Replace(base, rep[0], rep[1], 1)
		if text == base {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if mustLoad(t, text).Hash() == h {
			t.Errorf("changing %s did not change the hash", name)
		}
	}
	if mustLoad(t, "minVersion = 'v8.0.0'\ndescription = 'x'\n"+base).Hash() != h {
		t.Error("minVersion or description changed the hash")
	}
}

func wantWarning(t *testing.T, rs *RuleSet, substr string) {
	t.Helper()
	for _, w := range rs.Warnings() {
		if strings.Contains(w, substr) {
			return
		}
	}
	t.Errorf("no warning contains %q; warnings: %q", substr, rs.Warnings())
}
