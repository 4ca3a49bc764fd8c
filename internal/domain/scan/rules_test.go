package scan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string // substrings of the error
	}{
		{"unknown top-level key", "titel = 'x'\n[[rules]]\nid='a'\nregex='a'\n", []string{"titel"}},
		{"unknown rule key", "[[rules]]\nid='a'\nregex='a'\nsecretgroupp=1\n", []string{`rules["a"].secretgroupp`}},
		{"unknown old allowlist key", "[[rules]]\nid='a'\nregex='a'\n[rules.allowlist]\nregex=['x']\n", []string{`rules["a"].allowlist.regex`}},
		{"unknown new allowlist key", "[[rules]]\nid='a'\nregex='a'\n[[rules.allowlists]]\npath=['x']\n", []string{`rules["a"].allowlists[0].path`}},
		{"unknown global allowlist key", "[[rules]]\nid='a'\nregex='a'\n[allowlist]\nfiles=['x']\n", []string{"allowlist.files"}},
		{"unknown extend key", "[extend]\nuseDefaults=true\n", []string{"extend.useDefaults"}},
		{"bad regex names the rule", "[[rules]]\nid='broken'\nregex='a(b'\nkeywords=['a']\n", []string{`rule "broken"`, "regex"}},
		{"look-ahead", "[[rules]]\nid='la'\nregex='token(?=[a-z])'\nkeywords=['token']\n", []string{`rule "la"`, "look-around", "(?="}},
		{"negative look-ahead", "[[rules]]\nid='nla'\nregex='token(?!x)'\n", []string{`rule "nla"`, "look-around"}},
		{"look-behind", "[[rules]]\nid='lb'\nregex='(?<=key=)[a-z]+'\n", []string{`rule "lb"`, "look-around", "(?<="}},
		{"negative look-behind", "[[rules]]\nid='nlb'\nregex='(?<!x)[a-z]+'\n", []string{`rule "nlb"`, "look-around"}},
		{"back-reference", "[[rules]]\nid='br'\nregex='(a)\\1'\n", []string{`rule "br"`, "back-reference"}},
		{"bad path regex", "[[rules]]\nid='p'\npath='(x'\n", []string{`rule "p"`, "path"}},
		{"bad allowlist regex", "[[rules]]\nid='r'\nregex='a'\n[[rules.allowlists]]\nregexes=['(']\n", []string{`rule "r"`, "allowlist #1"}},
		{"look-around in allowlist", "[[rules]]\nid='r'\nregex='a'\n[[rules.allowlists]]\nregexes=['a(?!b)']\n", []string{`rule "r"`, "look-around"}},
		{"secretGroup too large", "[[rules]]\nid='g'\nregex='(a)'\nsecretGroup=2\n", []string{`rule "g"`, "secretGroup"}},
		{"no id", "[[rules]]\nregex='a'\n", []string{"no id"}},
		{"duplicate id", "[[rules]]\nid='a'\nregex='a'\n[[rules]]\nid='a'\nregex='b'\n", []string{`"a"`, "twice"}},
		{"neither regex nor path", "[[rules]]\nid='e'\nkeywords=['x']\n", []string{`rule "e"`, "neither"}},
		{"no rules", "title='x'\n", []string{"no rules"}},
		{"bad condition", "[[rules]]\nid='a'\nregex='a'\n[[rules.allowlists]]\ncondition='XOR'\nstopwords=['x']\n", []string{"XOR"}},
		{"bad regexTarget", "[[rules]]\nid='a'\nregex='a'\n[[rules.allowlists]]\nregexTarget='file'\nregexes=['x']\n", []string{"file"}},
		{"empty allowlist", "[[rules]]\nid='a'\nregex='a'\n[[rules.allowlists]]\ndescription='nothing'\n", []string{"no commits, paths, regexes or stopwords"}},
		{"targetRules unknown", "[[rules]]\nid='a'\nregex='a'\n[[allowlists]]\ntargetRules=['b']\nstopwords=['x']\n", []string{`unknown rule "b"`}},
		{"targetRules in a rule", "[[rules]]\nid='a'\nregex='a'\n[[rules.allowlists]]\ntargetRules=['a']\nstopwords=['x']\n", []string{"global"}},
		{"negative entropy", "[[rules]]\nid='a'\nregex='a'\nentropy=-1\n", []string{`rule "a"`, "entropy"}},
		{"not TOML", "[[rules]\n", []string{"parsing"}},
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

func TestLoadNormalizes(t *testing.T) {
	rs := mustLoad(t, `
title = "mine"
[[rules]]
id = "r1"
description = "one"
regex = '''tok_([a-z0-9]{8})'''
entropy = 2
keywords = ["TOK_", "tok_"]
tags = ["t"]
[rules.allowlist]
regexes = ['''^aaaa''']
stopwords = ["DUMMY"]
[[rules.allowlists]]
condition = "and"
paths = ['''_test\.go$''']
commits = ["ABC"]

[[allowlists]]
description = "vendor"
paths = ['''^vendor/''']
`)
	if rs.Title() != "mine" || rs.Len() != 1 {
		t.Fatalf("title %q len %d", rs.Title(), rs.Len())
	}
	r := rs.Rules()[0]
	if r.Entropy != 2 || strings.Join(r.Keywords, ",") != "tok_" || len(r.Allowlists) != 2 {
		t.Fatalf("rule = %+v", r)
	}
	if a := r.Allowlists[0]; a.Condition != "OR" || a.RegexTarget != "secret" || a.StopWords[0] != "dummy" {
		t.Errorf("old-form allowlist = %+v", a)
	}
	if a := r.Allowlists[1]; a.Condition != "AND" {
		t.Errorf("new-form allowlist = %+v", a)
	}
	if g := rs.Allowlists(); len(g) != 1 || g[0].Paths[0] != "^vendor/" {
		t.Errorf("global allowlists = %+v", g)
	}
	// Rules returns copies.
	rs.Rules()[0].Keywords[0] = "changed"
	if rs.Rules()[0].Keywords[0] != "tok_" {
		t.Error("Rules() exposes internal slices")
	}
}

// useDefault extends gitleaks' maintained set, as in gitleaks, so that a
// gitleaks configuration finds what gitleaks finds.
func TestExtendUseDefault(t *testing.T) {
	def := mustLoad(t, string(maintainedTOML))
	rs := mustLoad(t, `
[extend]
useDefault = true
disabledRules = ["jwt"]

[[rules]]
id = "github-pat"
description = "replaced"
regex = '''(ghp_[a-z]{6})'''
keywords = ["ghp_"]

[[rules]]
id = "internal-token"
description = "our own"
regex = '''itk_[0-9a-f]{16}'''
keywords = ["itk_"]

[[allowlists]]
paths = ['''^testdata/''']
`)
	byID := map[string]Rule{}
	for _, r := range rs.Rules() {
		byID[r.ID] = r
	}
	if len(byID) != def.Len() { // -jwt +internal-token
		t.Errorf("%d rules, want %d", len(byID), def.Len())
	}
	if _, ok := byID["jwt"]; ok {
		t.Error("disabled rule jwt is still there")
	}
	if byID["github-pat"].Description != "replaced" {
		t.Error("same id did not override the default rule")
	}
	if _, ok := byID["internal-token"]; !ok {
		t.Error("own rule missing")
	}
	if _, ok := byID["aws-access-token"]; !ok {
		t.Error("default rules missing")
	}
	if rs.Title() != def.Title() {
		t.Errorf("title %q, want the default's", rs.Title())
	}
	if want := "gitleaks " + GitleaksVersion + " default configuration (222 rules)"; rs.Source() != want {
		t.Errorf("source %q, want %q", rs.Source(), want)
	}
	if len(rs.Allowlists()) != len(def.Allowlists())+1 {
		t.Errorf("global allowlists: %+v", rs.Allowlists())
	}

	s := newTestScanner(t, rs)
	g := newGen(3)
	text := "a = itk_" + g.s(hexChars, 16) + "\nb = ghp_abcdef\nc = AKIA" + g.s(base32Chars, 16) + "\n"
	got := strings.Join(ruleIDs(s.Scan("x.txt", []byte(text), "").Findings), ",")
	if got != "internal-token,github-pat,aws-access-token" {
		t.Errorf("findings %s", got)
	}
	if n := len(s.Scan("testdata/x.txt", []byte(text), "").Findings); n != 0 {
		t.Errorf("global allowlist ignored: %d findings", n)
	}
}

func TestExtendPath(t *testing.T) {
	dir := t.TempDir()
	base := "[[rules]]\nid='base'\nregex='base_[0-9]{4}'\nkeywords=['base_']\n[[rules]]\nid='gone'\nregex='gone'\nkeywords=['gone']\n"
	if err := os.WriteFile(filepath.Join(dir, "base.toml"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	top := "[extend]\npath='base.toml'\ndisabledRules=['gone']\n[[rules]]\nid='top'\nregex='top_[0-9]{4}'\nkeywords=['top_']\n"
	p := filepath.Join(dir, "top.toml")
	if err := os.WriteFile(p, []byte(top), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rs.Rules() {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "base,top" {
		t.Errorf("rules %v", ids)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.toml")); err == nil {
		t.Error("LoadFile of a missing file succeeded")
	}
}

func TestHashStableAndSensitive(t *testing.T) {
	const base = `
title = "t"
[[rules]]
id = "b"
description = "bee"
regex = '''b_([a-z0-9]{8})'''
secretGroup = 1
entropy = 2.5
keywords = ["b_", "bb"]
path = '''\.go$'''
tags = ["x"]
[[rules.allowlists]]
regexes = ['''^b_0''']
stopwords = ["dummy"]
commits = ["abc"]
paths = ['''_test\.go$''']
[[rules]]
id = "a"
regex = '''a_[0-9]{8}'''
keywords = ["a_"]
[[allowlists]]
paths = ['''^vendor/''']
`
	h := mustLoad(t, base).Hash()
	if len(h) != 64 {
		t.Fatalf("hash %q", h)
	}
	if h2 := mustLoad(t, base).Hash(); h2 != h {
		t.Error("hash differs between two loads of the same text")
	}
	d1, d2 := mustLoad(t, string(maintainedTOML)).Hash(), mustLoad(t, "[extend]\nuseDefault=true\n").Hash()
	if d1 != d2 {
		t.Error("the maintained set and an empty extension of it hash differently")
	}
	if mustDefault(t).Hash() == d1 {
		t.Error("the built-in set hashes like the maintained set without its extension")
	}

	same := map[string][2]string{
		"title":              {`title = "t"`, `title = "other"`},
		"description":        {`description = "bee"`, `description = "other"`},
		"tags":               {`tags = ["x"]`, `tags = ["y"]`},
		"keyword order/case": {`keywords = ["b_", "bb"]`, `keywords = ["BB", "b_"]`},
	}
	for name, rep := range same {
		text := strings.Replace(base, rep[0], rep[1], 1)
		if text == base {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if got := mustLoad(t, text).Hash(); got != h {
			t.Errorf("changing %s changed the hash", name)
		}
	}

	// Rule order in the file does not matter: rules are hashed sorted by id.
	ruleA := "[[rules]]\nid = \"a\"\nregex = '''a_[0-9]{8}'''\nkeywords = [\"a_\"]\n"
	reordered := strings.Replace(strings.Replace(base, ruleA, "", 1), "title = \"t\"\n", "title = \"t\"\n"+ruleA, 1)
	if reordered == base || strings.Count(reordered, "id = \"a\"") != 1 {
		t.Fatal("reordering did not apply")
	}
	if mustLoad(t, reordered).Hash() != h {
		t.Error("rule order changed the hash")
	}

	differ := map[string][2]string{
		"regex":            {`b_([a-z0-9]{8})`, `b_([a-z0-9]{9})`},
		"secretGroup":      {"secretGroup = 1", "secretGroup = 0"},
		"entropy":          {"entropy = 2.5", "entropy = 2.6"},
		"keywords":         {`keywords = ["b_", "bb"]`, `keywords = ["b_"]`},
		"path":             {`path = '''\.go$'''`, `path = '''\.py$'''`},
		"id":               {`id = "a"`, `id = "c"`},
		"allowlist regex":  {`regexes = ['''^b_0''']`, `regexes = ['''^b_1''']`},
		"allowlist stop":   {`stopwords = ["dummy"]`, `stopwords = ["fake"]`},
		"allowlist commit": {`commits = ["abc"]`, `commits = ["abd"]`},
		"allowlist path":   {`paths = ['''_test\.go$''']`, `paths = ['''_spec\.go$''']`},
		"allowlist cond":   {`stopwords = ["dummy"]`, "stopwords = [\"dummy\"]\ncondition = \"AND\""},
		"allowlist target": {`stopwords = ["dummy"]`, "stopwords = [\"dummy\"]\nregexTarget = \"line\""},
		"global allowlist": {`paths = ['''^vendor/''']`, `paths = ['''^third_party/''']`},
		"extra rule":       {`[[allowlists]]`, "[[rules]]\nid = \"c\"\nregex = 'c'\n[[allowlists]]"},
	}
	for name, rep := range differ {
		text := strings.Replace(base, rep[0], rep[1], 1)
		if text == base {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if got := mustLoad(t, text).Hash(); got == h {
			t.Errorf("changing %s did not change the hash", name)
		}
	}
}

func TestPolicy(t *testing.T) {
	rs := mustDefault(t)
	p := func(cfg Config, key []byte) string {
		s, err := New(rs, cfg, key)
		if err != nil {
			t.Fatal(err)
		}
		return s.Policy()
	}
	base := p(DefaultConfig(), testKey)
	if base != p(DefaultConfig(), testKey) {
		t.Error("policy not stable")
	}
	if strings.Contains(base, rs.Hash()) || len(base) != 64 {
		t.Errorf("policy %q", base)
	}
	cfg := DefaultConfig()
	cfg.MaxBlobBytes = 1 << 20
	cfg2 := DefaultConfig()
	cfg2.BinaryIsPartial = true
	cfg3 := DefaultConfig()
	cfg3.OversizedIsPartial = false
	for i, other := range []string{p(cfg, testKey), p(cfg2, testKey), p(cfg3, testKey), p(DefaultConfig(), []byte("another-key-0123456789"))} {
		if other == base {
			t.Errorf("variant %d has the same policy", i)
		}
	}
	other := mustLoad(t, "[[rules]]\nid='a'\nregex='a'\n")
	s, _ := New(other, DefaultConfig(), testKey)
	if s.Policy() == base {
		t.Error("a different rule set has the same policy")
	}
	if _, err := New(rs, DefaultConfig(), []byte("short")); err == nil {
		t.Error("New accepted a short key")
	}
	if _, err := New(nil, DefaultConfig(), testKey); err == nil {
		t.Error("New accepted a nil rule set")
	}
}

func TestUnknownKeyInInlineTables(t *testing.T) {
	_, err := Load(strings.NewReader("rules = [{id = 'a', regex = 'a', keyword = ['a']}]\n"))
	if err == nil || !strings.Contains(err.Error(), "keyword") {
		t.Errorf("err = %v", err)
	}
	rs := mustLoad(t, "rules = [{id = 'a', regex = 'a_[0-9]', keywords = ['a_'], allowlists = [{stopwords = ['x']}]}]\n")
	if rs.Len() != 1 || len(rs.Rules()[0].Allowlists) != 1 {
		t.Errorf("inline tables: %+v", rs.Rules())
	}
}
