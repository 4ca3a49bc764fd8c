package scan

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestKeywordPrefilter(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "alpha"
regex = '''alpha_[0-9]{4}'''
keywords = ["alpha_"]
[[rules]]
id = "beta"
regex = '''beta_[0-9]{4}'''
keywords = ["beta_", "bravo"]
[[rules]]
id = "always"
regex = '''zeta_[0-9]{4}'''
`)
	s := newTestScanner(t, rs)
	var mu sync.Mutex
	runs := map[string]int{}
	s.onRegex = func(id string) { mu.Lock(); runs[id]++; mu.Unlock() }

	cases := []struct {
		text     string
		wantRuns string // sorted rule ids whose regex ran
		want     string // findings
	}{
		{"nothing to see here\n", "always", ""},
		{"x = ALPHA_1234 beta\n", "alpha,always", ""}, // keyword found case-insensitively; regex is case-sensitive
		{"x = alpha_1234\n", "alpha,always", "alpha"},
		{"BRAVO team: beta_9876, zeta_0000\n", "always,beta", "always,beta"},
		{"alpha_1 alpha_2 alpha_3 beta_4444", "alpha,always,beta", "beta"},
	}
	for _, c := range cases {
		clear(runs)
		res := s.Scan("f.txt", []byte(c.text), "")
		var ran []string
		for id, n := range runs {
			if n != 1 {
				t.Errorf("%q: rule %s ran %d times", c.text, id, n)
			}
			ran = append(ran, id)
		}
		slices.Sort(ran)
		if got := strings.Join(ran, ","); got != c.wantRuns {
			t.Errorf("%q: regexes run = %s, want %s", c.text, got, c.wantRuns)
		}
		ids := ruleIDs(res.Findings)
		slices.Sort(ids)
		if got := strings.Join(ids, ","); got != c.want {
			t.Errorf("%q: findings = %s, want %s", c.text, got, c.want)
		}
	}
}

// With the default set, a clean blob runs no regex at all.
func TestDefaultPrefilterCleanBlob(t *testing.T) {
	s := newTestScanner(t, mustDefault(t))
	ran := 0
	s.onRegex = func(string) { ran++ }
	clean := []byte(strings.Repeat("func add(a, b int) int { return a + b } // plain code\n", 200))
	if res := s.Scan("x.go", clean, ""); len(res.Findings) != 0 || ran != 0 {
		t.Errorf("clean blob: %d findings, %d regex runs", len(res.Findings), ran)
	}
	s.Scan("x.go", append(clean, "var token = 1\n"...), "")
	if ran != 1 {
		t.Errorf("one keyword: %d regex runs, want 1", ran)
	}
}

func TestEntropy(t *testing.T) {
	if got := shannon([]byte("aaaa")); got != 0 {
		t.Errorf("shannon(aaaa) = %v", got)
	}
	if got := shannon([]byte("abcdefgh")); math.Abs(got-3) > 1e-9 {
		t.Errorf("shannon(abcdefgh) = %v, want 3", got)
	}
	if got := shannon([]byte("aabb")); math.Abs(got-1) > 1e-9 {
		t.Errorf("shannon(aabb) = %v, want 1", got)
	}
	rs := mustLoad(t, `
[[rules]]
id = "e"
regex = '''tok_([a-z0-9]{8})'''
secretGroup = 1
entropy = 2.75
keywords = ["tok_"]
`)
	s := newTestScanner(t, rs)
	for text, want := range map[string]int{
		"tok_aaaaaaaa": 0, // 0 bits
		"tok_aabbccdd": 0, // 2 bits
		"tok_abcdefga": 0, // exactly 2.75 bits: not above (as gitleaks)
		"tok_abcdefgh": 1, // 3 bits
		"tok_a1b2c3d4": 1,
	} {
		if got := len(s.Scan("f", []byte(text), "").Findings); got != want {
			t.Errorf("%s: %d findings, want %d", text, got, want)
		}
	}
}

func TestAllowlists(t *testing.T) {
	const rule = `
[[rules]]
id = "k"
regex = '''key=(tok_[a-z0-9]{8})'''
secretGroup = 1
keywords = ["tok_"]
`
	const other = `
[[rules]]
id = "other"
regex = '''oth_[a-z0-9]{8}'''
keywords = ["oth_"]
`
	type probe struct {
		path, commit, text string
		allowed            bool
	}
	const secret0 = "key=tok_0abcdefg"
	const secret1 = "key=tok_1abcdefg"
	cases := []struct {
		name   string
		config string
		probes []probe
	}{
		{"regex on secret (default target)", rule + "[[rules.allowlists]]\nregexes=['''^tok_0''']\n", []probe{
			{"a", "", secret0, true}, {"a", "", secret1, false}}},
		{"regex on secret does not see the match", rule + "[[rules.allowlists]]\nregexes=['''^key=''']\n", []probe{
			{"a", "", secret0, false}}},
		{"regex on match", rule + "[[rules.allowlists]]\nregexTarget='match'\nregexes=['''^key=tok_0''']\n", []probe{
			{"a", "", secret0, true}, {"a", "", secret1, false}}},
		{"regex on line", rule + "[[rules.allowlists]]\nregexTarget='line'\nregexes=['''# gitleaks:allow$''']\n", []probe{
			{"a", "", "x\r\n" + secret1 + " # gitleaks:allow\r\ny", true},
			{"a", "", secret1 + "\n# gitleaks:allow", false}}},
		{"paths", rule + "[[rules.allowlists]]\npaths=['''_test\\.go$''']\n", []probe{
			{"x_test.go", "", secret1, true}, {"x.go", "", secret1, false}}},
		{"commits", rule + "[[rules.allowlists]]\ncommits=['''deadbeef''']\n", []probe{
			{"a", "DEADBEEF", secret1, true}, {"a", "deadbeee", secret1, false}, {"a", "", secret1, false}}},
		{"stopwords", rule + "[[rules.allowlists]]\nstopwords=['cdef']\n", []probe{
			{"a", "", "key=tok_1abCDEFg", true}, {"a", "", "key=tok_1abcdxfg", false}}},
		{"stopword must be in the secret, not the match", rule + "[[rules.allowlists]]\nstopwords=['key=']\n", []probe{
			{"a", "", secret1, false}}},
		{"OR", rule + "[[rules.allowlists]]\npaths=['''^vendor/''']\nstopwords=['cdef']\n", []probe{
			{"vendor/a", "", "key=tok_1xxxxxxx", true}, {"a", "", secret1, true}, {"a", "", "key=tok_1xxxxxxx", false}}},
		{"AND", rule + "[[rules.allowlists]]\ncondition='AND'\npaths=['''^vendor/''']\nstopwords=['cdef']\n", []probe{
			{"vendor/a", "", secret1, true}, {"vendor/a", "", "key=tok_1xxxxxxx", false}, {"a", "", secret1, false}}},
		{"AND of paths and commits", rule + "[[rules.allowlists]]\ncondition='AND'\npaths=['''^vendor/''']\ncommits=['c1']\n", []probe{
			{"vendor/a", "c1", secret1, true}, {"vendor/a", "c2", secret1, false}, {"a", "c1", secret1, false}}},
		{"AND of regex and stopword", rule + "[[rules.allowlists]]\ncondition='AND'\nregexes=['''^tok_1''']\nstopwords=['cdef']\n", []probe{
			{"a", "", secret1, true}, {"a", "", "key=tok_1xxxxxxx", false}, {"a", "", secret0, false}}},
		{"old form", rule + "[rules.allowlist]\nregexes=['''^tok_0''']\n", []probe{
			{"a", "", secret0, true}, {"a", "", secret1, false}}},
		{"global", rule + other + "[allowlist]\nregexes=['''^tok_0|^oth_0''']\n", []probe{
			{"a", "", secret0, true}, {"a", "", "oth_0xxxxxxx", true}, {"a", "", "oth_1xxxxxxx", false}}},
		{"global paths", rule + other + "[[allowlists]]\npaths=['''^testdata/''']\n", []probe{
			{"testdata/x", "", secret1 + " oth_1xxxxxxx", true}, {"src/x", "", secret1, false}}},
		{"global targetRules", rule + other + "[[allowlists]]\ntargetRules=['other']\npaths=['''^testdata/''']\n", []probe{
			{"testdata/x", "", "oth_1xxxxxxx", true}, {"testdata/x", "", secret1, false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTestScanner(t, mustLoad(t, c.config))
			for _, p := range c.probes {
				res := s.Scan(p.path, []byte(p.text), p.commit)
				if got := len(res.Findings) == 0; got != p.allowed {
					t.Errorf("path %q commit %q text %q: allowed = %v, want %v (findings %v)", p.path, p.commit, p.text, got, p.allowed, ruleIDs(res.Findings))
				}
			}
		})
	}
}

func TestPathRules(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "keystore-file"
description = "a key store file"
path = '''\.(?:p12|pfx|jks)$'''
[[rules.allowlists]]
paths = ['''^testdata/''']

[[rules]]
id = "env-only"
regex = '''SECRET=(\S{6,})'''
path = '''(?:^|/)\.env$'''
keywords = ["secret="]
`)
	s := newTestScanner(t, rs)
	res := s.Scan("certs/server.p12", []byte("text"), "")
	if len(res.Findings) != 1 || res.Findings[0].RuleID != "keystore-file" || res.Findings[0].Line != 0 ||
		res.Findings[0].SecretHash != "" || res.Findings[0].Preview != "" || res.Findings[0].Description != "a key store file" {
		t.Errorf("path rule: %+v", res.Findings)
	}
	// Binary key stores are still reported by path, and the skip is kept.
	res = s.Scan("certs/server.jks", []byte{0xfe, 0xed, 0, 0, 1}, "")
	if res.Skipped != SkipBinary || len(res.Findings) != 1 {
		t.Errorf("binary path match: %+v", res)
	}
	if res := s.Scan("testdata/server.p12", []byte("x"), ""); len(res.Findings) != 0 {
		t.Errorf("allowlisted path rule fired: %+v", res)
	}
	if res := s.Scan("server.p12.txt", []byte("x"), ""); len(res.Findings) != 0 {
		t.Errorf("path rule fired on another path: %+v", res)
	}
	text := []byte("SECRET=abcdef123\n")
	if n := len(s.Scan("app/.env", text, "").Findings); n != 1 {
		t.Errorf(".env: %d findings", n)
	}
	if n := len(s.Scan("app/env.go", text, "").Findings); n != 0 {
		t.Errorf("regex+path rule fired outside its path: %d findings", n)
	}
}

func TestSecretGroup(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "explicit"
regex = '''(ex)=(\w+)'''
secretGroup = 2
keywords = ["ex="]
[[rules]]
id = "first-non-empty"
regex = '''fn=(?:(a+)|(b+))'''
keywords = ["fn="]
[[rules]]
id = "whole"
regex = '''wh=\w+'''
keywords = ["wh="]
[[rules]]
id = "optional"
regex = '''op=(x+)?;'''
secretGroup = 1
keywords = ["op="]
`)
	s := newTestScanner(t, rs)
	for text, want := range map[string]string{
		"ex=value1":  "value1",
		"fn=bbb":     "bbb",
		"fn=aa":      "aa",
		"wh=all_of":  "wh=all_of",
		"op=xx;":     "xx",
		"op=; op=x;": "x", // the first match has no secret group and is skipped
	} {
		res := s.Scan("f", []byte(text), "")
		if len(res.Findings) != 1 {
			t.Errorf("%q: %d findings", text, len(res.Findings))
			continue
		}
		f := res.Findings[0]
		if got := text[f.Start:f.End]; got != want {
			t.Errorf("%q: secret %q, want %q", text, got, want)
		}
	}
}

func TestSkips(t *testing.T) {
	rs := mustDefault(t)
	g := newGen(4)
	secret := "ghp_" + g.mixed(36)
	text := []byte("token " + secret + "\n")

	if c := DefaultConfig(); c.MaxBlobBytes != 10<<20 || !c.OversizedIsPartial || c.BinaryIsPartial {
		t.Errorf("DefaultConfig = %+v", c)
	}
	mk := func(cfg Config) *Scanner {
		s, err := New(rs, cfg, testKey)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	binary := append([]byte("PK\x03\x04\x00"), text...)
	lateNUL := append(append(bytes.Repeat([]byte("a"), binarySniffLen), 0), text...)
	big := append(bytes.Repeat([]byte("x\n"), 600), text...)

	cases := []struct {
		name    string
		cfg     Config
		content []byte
		skipped SkipReason
		partial bool
		finds   int
	}{
		{"text", DefaultConfig(), text, NotSkipped, false, 1},
		{"binary", DefaultConfig(), binary, SkipBinary, false, 0},
		{"binary partial", Config{MaxBlobBytes: 1 << 20, BinaryIsPartial: true}, binary, SkipBinary, true, 0},
		{"NUL after 8000 bytes", DefaultConfig(), lateNUL, NotSkipped, false, 1},
		{"oversized", Config{MaxBlobBytes: 1000, OversizedIsPartial: true}, big, SkipOversized, true, 0},
		{"oversized not partial", Config{MaxBlobBytes: 1000}, big, SkipOversized, false, 0},
		{"at the limit", Config{MaxBlobBytes: int64(len(big))}, big, NotSkipped, false, 1},
		{"zero limit means default", Config{}, big, NotSkipped, false, 1},
		{"no limit", Config{MaxBlobBytes: -1}, big, NotSkipped, false, 1},
		{"oversized wins over binary", Config{MaxBlobBytes: 3, OversizedIsPartial: true}, binary, SkipOversized, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mk(c.cfg)
			res := s.Scan("f", c.content, "")
			if res.Skipped != c.skipped || res.Partial != c.partial || len(res.Findings) != c.finds {
				t.Errorf("got %+v, want skipped %q partial %v findings %d", res, c.skipped, c.partial, c.finds)
			}
			pre, decided := s.Precheck("f", int64(len(c.content)), "")
			if decided != (c.skipped == SkipOversized) || (decided && !reflect.DeepEqual(pre, res)) {
				t.Errorf("Precheck = %+v, %v", pre, decided)
			}
			if c.skipped == SkipOversized {
				if s.MaxBlobBytes() != c.cfg.MaxBlobBytes || !reflect.DeepEqual(s.Oversized(int64(len(c.content))), res) {
					t.Errorf("MaxBlobBytes %d, Oversized %+v", s.MaxBlobBytes(), s.Oversized(int64(len(c.content))))
				}
			}
			if c.skipped != NotSkipped && s.IsPartial(c.skipped) != c.partial {
				t.Errorf("IsPartial(%s) = %v", c.skipped, s.IsPartial(c.skipped))
			}
		})
	}
	// A blob allowlisted by path is not "skipped": it is decided.
	s, err := New(mustLoad(t, "[extend]\nuseDefault=true\n[allowlist]\npaths=['''^vendor/''']\n"),
		Config{MaxBlobBytes: 10, OversizedIsPartial: true}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if res, ok := s.Precheck("vendor/big.js", 1<<30, ""); !ok || res.Partial || res.Skipped != NotSkipped {
		t.Errorf("allowlisted Precheck = %+v %v", res, ok)
	}
}

func TestFindingPositions(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "t"
description = "test token"
regex = '''tk_[a-z0-9]{10}'''
keywords = ["tk_"]
`)
	s := newTestScanner(t, rs)
	for _, eol := range []string{"\n", "\r\n"} {
		lines := []string{
			"first line",
			"  x = tk_aaaaa11111", // line 2, col 7
			"",
			"é tk_bbbbb22222 and tk_ccccc33333", // line 4: 'é' is 2 bytes
			"tk_ddddd44444",                     // line 5, col 1
		}
		text := strings.Join(lines, eol)
		res := s.Scan("f", []byte(text), "")
		type pos struct{ line, col int }
		want := []pos{{2, 7}, {4, 4}, {4, 22}, {5, 1}}
		if len(res.Findings) != len(want) {
			t.Fatalf("eol %q: %d findings", eol, len(res.Findings))
		}
		for i, f := range res.Findings {
			if f.Line != want[i].line || f.Column != want[i].col {
				t.Errorf("eol %q finding %d: line %d col %d, want %d %d", eol, i, f.Line, f.Column, want[i].line, want[i].col)
			}
			sec := text[f.Start:f.End]
			if !strings.HasPrefix(sec, "tk_") || len(sec) != 13 {
				t.Errorf("eol %q finding %d: span %q", eol, i, sec)
			}
			lineText := strings.Split(text, eol)[f.Line-1]
			if got := lineText[f.Column-1 : f.Column-1+len(sec)]; got != sec {
				t.Errorf("eol %q finding %d: column points at %q", eol, i, got)
			}
			if f.RuleID != "t" || f.Description != "test token" {
				t.Errorf("finding %+v", f)
			}
			assertNoSecret(t, f, sec)
		}
	}
}

// A preview shows at most a quarter of a secret, and the length only of a
// long one: a short secret (a password) gives a guess neither its length
// nor more than 2 characters, and the characters shown tell only whether
// it has at least 8.
func TestPreview(t *testing.T) {
	for n := 0; n <= 40; n++ {
		secret := strings.Repeat("s", n)
		p := preview([]byte(secret))
		shown, rest, ok := strings.Cut(p, "…")
		if !ok {
			t.Fatalf("preview(%d) = %q: no ellipsis", n, p)
		}
		wantShown, wantRest := 0, ""
		switch {
		case n >= 16:
			wantShown, wantRest = 4, fmt.Sprintf("(%d)", n)
		case n >= 8:
			wantShown = 2
		}
		if len(shown) != wantShown || rest != wantRest {
			t.Errorf("preview of %d characters = %q, want %d characters shown and %q after", n, p, wantShown, wantRest)
		}
		if 4*len(shown) > n {
			t.Errorf("preview of %d characters shows %d: more than a quarter", n, len(shown))
		}
	}
	for _, c := range []struct{ secret, want string }{
		{"\x00\nabcdefghijklmnop", "??ab…(18)"},
		{"ééééééééééééééééé", "éééé…(17)"},
		{"hunter2", "…"},
		{"correct-horse", "co…"},
		{"\x1b[31mpasswd", "?[…"},
	} {
		if p := preview([]byte(c.secret)); p != c.want {
			t.Errorf("preview(%q) = %q, want %q", c.secret, p, c.want)
		}
	}
	if p := preview([]byte("\xff\xfeabcdefghijklmnop")); !utf8.ValidString(p) {
		t.Errorf("invalid UTF-8 in preview %q", p)
	}
}

// Each key version hashes in a namespace of its own, with a policy (a
// scope) of its own, even with the same key; version 1 is the key as
// hashes were made before versions; the same key and version hash the
// same in every scanner made with them (a restarted worker).
func TestKeyVersions(t *testing.T) {
	rs := mustDefault(t)
	secret := "ghp_" + newGen(7).mixed(36)
	text := []byte("a=" + secret + "\n")
	hash := func(s *Scanner) string {
		t.Helper()
		r := s.Scan("f", text, "")
		if len(r.Findings) != 1 {
			t.Fatalf("%d findings", len(r.Findings))
		}
		return r.Findings[0].SecretHash
	}
	v1 := newTestScanner(t, rs)
	v2, err := v1.WithKeyVersion(2)
	if err != nil {
		t.Fatal(err)
	}
	again, err := newTestScanner(t, rs).WithKeyVersion(2)
	if err != nil {
		t.Fatal(err)
	}
	if v1.KeyVersion() != 1 || v2.KeyVersion() != 2 {
		t.Errorf("versions %d %d", v1.KeyVersion(), v2.KeyVersion())
	}
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte(secret))
	if hash(v1) != hex.EncodeToString(mac.Sum(nil)) {
		t.Error("version 1 is not the key itself")
	}
	if hash(v1) == hash(v2) || v1.Policy() == v2.Policy() {
		t.Error("versions 1 and 2 of the same key share hashes or a policy")
	}
	if hash(v2) != hash(again) || v2.Policy() != again.Policy() || v2.Digest("prod.env") != again.Digest("prod.env") {
		t.Error("the same key and version hash differently in another scanner")
	}
	if v2.WithDecodeDepth(1).KeyVersion() != 2 || v2.WithArchiveDepth(0).KeyVersion() != 2 {
		t.Error("a derived scanner lost its key version")
	}
	if _, err := v1.WithKeyVersion(0); err == nil {
		t.Error("version 0 accepted")
	}
}

// Digests are keyed: no digest of a common name made without the key
// finds a name, and two installations digest a name differently.
func TestDigestKeyed(t *testing.T) {
	rs := mustDefault(t)
	s := newTestScanner(t, rs)
	other, err := New(rs, DefaultConfig(), []byte("a-different-key-of-32-bytes-long"))
	if err != nil {
		t.Fatal(err)
	}
	d := s.Digest("prod.env")
	if len(d) != DigestLen || d != s.Digest("prod.env") || d == s.Digest("prod.env2") {
		t.Errorf("digest %q", d)
	}
	if d == other.Digest("prod.env") {
		t.Error("two keys digest a name the same")
	}
	plain := sha256.Sum256([]byte("prod.env"))
	if strings.HasPrefix(hex.EncodeToString(plain[:]), d[:12]) {
		t.Error("the digest is an unkeyed hash")
	}
}

func TestSecretHashKeyed(t *testing.T) {
	rs := mustDefault(t)
	g := newGen(5)
	secret := "ghp_" + g.mixed(36)
	text := []byte("a=" + secret + "\nb=" + secret + "\n")
	s1 := newTestScanner(t, rs)
	other := []byte("a-different-key-of-32-bytes-long")
	s2, err := New(rs, DefaultConfig(), other)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := s1.Scan("f", text, ""), s2.Scan("f", text, "")
	if len(r1.Findings) != 2 || len(r2.Findings) != 2 {
		t.Fatalf("findings %d %d", len(r1.Findings), len(r2.Findings))
	}
	if r1.Findings[0].SecretHash != r1.Findings[1].SecretHash {
		t.Error("same secret, same key: different hashes")
	}
	if r1.Findings[0].SecretHash == r2.Findings[0].SecretHash {
		t.Error("different keys: same hash")
	}
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte(secret))
	if want := hex.EncodeToString(mac.Sum(nil)); r1.Findings[0].SecretHash != want {
		t.Errorf("hash %s, want HMAC-SHA256 %s", r1.Findings[0].SecretHash, want)
	}
	plain := sha256.Sum256([]byte(secret))
	if r1.Findings[0].SecretHash == hex.EncodeToString(plain[:]) {
		t.Error("hash is not keyed")
	}
	for _, f := range append(r1.Findings, r2.Findings...) {
		assertNoSecret(t, f, secret)
	}
	// The key is copied: changing the caller's slice later changes nothing.
	key := append([]byte(nil), testKey...)
	s3, _ := New(rs, DefaultConfig(), key)
	key[0] ^= 0xff
	if s3.Scan("f", text, "").Findings[0].SecretHash != r1.Findings[0].SecretHash {
		t.Error("scanner shares the caller's key slice")
	}
}

func TestOrderAndOverlap(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "zz-specific"
regex = '''ab_[0-9]{6}'''
keywords = ["ab_"]
[[rules]]
id = "aa-broad"
regex = '''[a-z]{2}_[0-9]{6}'''
keywords = ["_"]
`)
	s := newTestScanner(t, rs)
	text := "cd_222222 ab_111111 ab_333333"
	res := s.Scan("f", []byte(text), "")
	var got []string
	for _, f := range res.Findings {
		got = append(got, fmt.Sprintf("%d:%s", f.Start, f.RuleID))
	}
	// The same span found by two rules is reported once per rule, ordered
	// by offset, then rule id.
	want := "0:aa-broad,10:aa-broad,10:zz-specific,20:aa-broad,20:zz-specific"
	if strings.Join(got, ",") != want {
		t.Errorf("findings %s, want %s", strings.Join(got, ","), want)
	}
}

func TestConcurrentScans(t *testing.T) {
	s := newTestScanner(t, mustDefault(t))
	ps := secretSamples()
	want := make([]Result, len(ps))
	for i, p := range ps {
		want[i] = s.Scan("f", []byte(p.text), "")
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for rep := 0; rep < 5; rep++ {
				for i := range ps {
					j := (i + w) % len(ps)
					if got := s.Scan("f", []byte(ps[j].text), ""); !reflect.DeepEqual(got, want[j]) {
						select {
						case errs <- fmt.Sprintf("worker %d example %d differs", w, j):
						default:
						}
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// raceEnabled is set by race_test.go: the race detector makes sync.Pool drop
// items, so allocation counts are meaningless under it.
var raceEnabled bool

// A generic rule gives way to a specific rule that found the same secret
// (gitleaks' rule), but not where its secret reaches beyond the specific
// one's, and two specific rules on one span are both reported.
func TestGenericGivesWay(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "vendor-token"
regex = '''vt_[a-z0-9]{8}'''
[[rules]]
id = "other-vendor"
regex = '''vt_[a-z0-9]{8}'''
[[rules]]
id = "generic-assignment"
regex = '''token\s*=\s*"?([a-z0-9_]{8,})'''
secretGroup = 1
`)
	s := newTestScanner(t, rs)
	cases := []struct{ text, want string }{
		{`token = "vt_ab12cd34"`, "other-vendor,vendor-token"},
		{`token = "vt_ab12cd34_and_more"`, "generic-assignment,other-vendor,vendor-token"},
		{`token = "plainvalue99"`, "generic-assignment"},
		{`token = "plainvalue99"` + "\nvt_ab12cd34", "generic-assignment,other-vendor,vendor-token"},
	}
	for _, c := range cases {
		ids := ruleIDs(s.Scan("f.txt", []byte(c.text), "").Findings)
		slices.Sort(ids)
		if got := strings.Join(ids, ","); got != c.want {
			t.Errorf("%q: findings %s, want %s", c.text, got, c.want)
		}
	}
}

// A whole-match secret leaves out the newlines the pattern took at either
// end, as gitleaks does; so it starts on the line of its first character.
func TestWholeMatchSecretDropsEdgeNewlines(t *testing.T) {
	rs := mustLoad(t, `
[[rules]]
id = "nl"
regex = '''\n?tok_[a-z0-9]{8}\n?'''
keywords = ["tok_"]
`)
	s := newTestScanner(t, rs)
	content := []byte("first\ntok_ab12cd34\nlast\n")
	fs := s.Scan("f", content, "").Findings
	if len(fs) != 1 {
		t.Fatalf("%d findings, want 1", len(fs))
	}
	if got := string(content[fs[0].Start:fs[0].End]); got != "tok_ab12cd34" || fs[0].Line != 2 {
		t.Errorf("secret %q on line %d, want %q on line 2", got, fs[0].Line, "tok_ab12cd34")
	}
}

// SecretHash is the hash a finding records for the same secret.
func TestSecretHashIsTheFindings(t *testing.T) {
	rs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rs, DefaultConfig(), []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("token = \"ghp_" + "R7v2Lq9XbN4kTz8WmC1pYs6JdHf3GaE0uQ5o" + "\"\n")
	r := s.Scan("conf.py", content, "")
	if len(r.Findings) != 1 {
		t.Fatalf("findings %+v", r.Findings)
	}
	f := r.Findings[0]
	if got := s.SecretHash(content[f.Start:f.End]); got != f.SecretHash {
		t.Errorf("SecretHash %s, finding %s", got, f.SecretHash)
	}
}
