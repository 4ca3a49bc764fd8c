package scan

import (
	"bytes"
	"reflect"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestKeywordMatcher(t *testing.T) {
	g := newGen(6)
	for round := 0; round < 200; round++ {
		var kws []string
		for i := 0; i < 1+g.r.IntN(8); i++ {
			k := g.s("abc_-", 1+g.r.IntN(4))
			if !strings.Contains(strings.Join(kws, "\x00")+"\x00", k+"\x00") {
				kws = append(kws, k)
			}
		}
		m := newKeywordMatcher(kws)
		text := []byte(g.s("abcABC_-x\n", 200))
		lower := bytes.ToLower(text)
		type occ struct{ kw, end int }
		var want, got []occ
		for id, k := range kws {
			for i := 0; i+len(k) <= len(lower); i++ {
				if string(lower[i:i+len(k)]) == k {
					want = append(want, occ{id, i + len(k) - 1})
				}
			}
		}
		trans, s := m.trans, uint32(0)
		for i, b := range text {
			s = trans[s+uint32(m.class[b])]
			if s >= m.outStart {
				for _, kw := range m.outs[s/m.nclass] {
					got = append(got, occ{int(kw), i})
				}
			} else if len(m.outs[s/m.nclass]) > 0 {
				t.Fatal("state below outStart has outputs")
			}
		}
		less := func(o []occ) func(i, j int) bool {
			return func(i, j int) bool { return o[i].end < o[j].end || o[i].end == o[j].end && o[i].kw < o[j].kw }
		}
		sort.Slice(want, less(want))
		sort.Slice(got, less(got))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("keywords %q text %q:\n got %v\nwant %v", kws, text, got, want)
		}
	}
}

func TestPlanAnchored(t *testing.T) {
	cases := []struct {
		regex    string
		keywords []string
		anchored bool
		before   int
	}{
		{`ghp_[A-Za-z0-9]{36}`, []string{"ghp_"}, true, 0},
		{`\bghp_[A-Za-z0-9]{36}\b`, []string{"ghp_"}, true, 4},
		{`ghp_[A-Za-z0-9]+`, []string{"ghp_"}, true, 0}, // unbounded: tried on the rest of the blob
		{`ghp_.*`, []string{"ghp_"}, true, 0},
		{`[a-z]{1,10}`, []string{"abc"}, false, 0},                  // keyword not required
		{`(?:abc|def)_[0-9]{4}`, []string{"abc"}, false, 0},         // def_1234 lacks it
		{`(?:abc|def)_[0-9]{4}`, []string{"abc_", "def_"}, true, 4}, // keyword spans the alternation
		{`(?i)Token[=:][a-z]{4}`, []string{"token"}, true, 0},       // every match starts with the keyword
		{`sk-(?:proj-[a-z]{4}|[a-z]{4}T3BlbkFJ)`, []string{"sk-proj-", "t3blbkfj"}, true, 15},
		{`gh[pousr]_[a-z]{4}`, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, true, 4},
		{`gh[pousr]_[a-z]{4}`, []string{"ghp_", "gho_"}, false, 0},
		{`(?m)^token=[a-z]{4}$`, []string{"token"}, true, 6},
		{`^token=[a-z]{4}\z`, []string{"token"}, true, 6},
		{`(?:tok)?en_[0-9]{2}`, []string{"token"}, false, 0}, // en_12 alone
		{`x{0,3}token`, []string{"token"}, true, 8},
		{`[a-z]{0,20}secret`, []string{"secret"}, true, 26},
		{`(?:to){1,2}ken`, []string{"token"}, true, 7},
		{`t(?:o|0)ken`, []string{"token", "t0ken"}, true, 5},
		{`[a-z]{0,3}`, []string{"a"}, false, 0},
		{`key`, nil, false, 0}, // no keywords: always whole blob
		// A lazy leading run is split off: the rest starts with the keyword.
		{`(?i)[\w.-]{0,50}?(?:key|token)[ \t]*[=:]\s*([a-z0-9]{8,})`, []string{"key", "token"}, true, 0},
	}
	for _, c := range cases {
		p := planAnchored(c.regex, c.keywords)
		if p != nil && p.lead != nil && (p.whole == nil || p.whole.lead != nil) {
			t.Errorf("%s: split without a plan of the whole regex", c.regex)
		}
		if (p != nil) != c.anchored || (p != nil && p.before != c.before) {
			t.Errorf("%s %q: anchored %v, want %v (before %d)", c.regex, c.keywords, p != nil, c.anchored, c.before)
			if p != nil {
				t.Logf("before = %d", p.before)
			}
		}
	}
}

func TestFirstBytes(t *testing.T) {
	cases := map[string]string{
		`ghp_x`:           "g",
		`(?i)ab`:          "Aa",
		`(?:x|y)?z`:       "xyz",
		`\b[0-9]{2,}`:     "0123456789",
		`(?:a*|b)c`:       "abc",
		`[a-c]{0,2}\.d`:   ".abc",
		`(?i:s)x`:         "Ss\xc5", // and ſ
		`\bé`:             "\xc3",
		`(?m)^\s{0,2}key`: "\t\n\f\r k",
	}
	for expr, want := range cases {
		set, nullable := firstBytes(mustParse(t, expr))
		if nullable {
			t.Errorf("%s: nullable", expr)
		}
		var got []byte
		for b, ok := range set {
			if ok {
				got = append(got, byte(b))
			}
		}
		w := []byte(want)
		slices.Sort(w)
		if string(got) != string(w) {
			t.Errorf("%s: first bytes %q, want %q", expr, got, w)
		}
	}
	set, _ := firstBytes(mustParse(t, `[^a]`))
	if set['a'] || !set['b'] || !set[0xff] || !set[0x80] || !set[0xc3] {
		t.Error("[^a] must start with anything but a, invalid bytes included")
	}
	if _, nullable := firstBytes(mustParse(t, `a?b*`)); !nullable {
		t.Error("a?b* is nullable")
	}
}

func TestRuneStart(t *testing.T) {
	content := []byte("aé€😀\xff\x80\xe2\x82x")
	var starts []int
	for i := 0; i < len(content); {
		starts = append(starts, i)
		_, w := utf8.DecodeRune(content[i:])
		i += w
	}
	if len(starts) != 9 {
		t.Fatalf("test data decodes to %d runes", len(starts))
	}
	for i := 0; i < len(content); i++ {
		if got := runeStart(content, i); got != slices.Contains(starts, i) {
			t.Errorf("runeStart(%d) = %v", i, got)
		}
	}
}

const anchoredTestRules = `
[extend]
useDefault = true

[[rules]]
id = "t-line-anchored"
regex = '''(?m)^\s{0,4}token\s{0,2}=\s{0,2}([a-z0-9]{4,12})$'''
keywords = ["token"]
[[rules]]
id = "t-word-bounded"
regex = '''\bkey_[a-z]{2,6}\b'''
keywords = ["key_"]
[[rules]]
id = "t-around"
regex = '''[a-z]{0,5}secret[a-z]{0,5}'''
keywords = ["secret"]
[[rules]]
id = "t-alternation"
regex = '''(?:ab|cd)_(?:x|yy){1,3}[0-9]{0,3}'''
keywords = ["ab_", "cd_"]
[[rules]]
id = "t-non-ascii"
regex = '''.{0,3}é{1,2}token.{0,3}'''
keywords = ["token"]
[[rules]]
id = "t-tight-start"
regex = '''\b[a-z]{0,3}key_'''
keywords = ["key_"]
[[rules]]
id = "t-tight-end"
regex = '''key_[a-z]{0,3}\b'''
keywords = ["key_"]
[[rules]]
id = "t-tight-line-start"
regex = '''(?m)^[a-z]{0,3}token'''
keywords = ["token"]
[[rules]]
id = "t-tight-line-end"
regex = '''(?m)token[a-z]{0,3}$'''
keywords = ["token"]
[[rules]]
id = "t-case"
regex = '''(?i)pass[a-z]{0,4}\s?[:=]\s?\S{1,8}'''
keywords = ["pass"]
`

// TestAnchoredEqualsWhole checks that anchored matching finds exactly what a
// whole-blob run finds, on random blobs made of keyword-rich pieces.
func TestAnchoredEqualsWhole(t *testing.T) {
	rs := mustLoad(t, anchoredTestRules)
	for _, cr := range rs.rules {
		if strings.HasPrefix(cr.ID, "t-") && cr.mode != modeAnchored {
			t.Fatalf("rule %s is not anchored; the test would prove nothing", cr.ID)
		}
	}
	anchored := newTestScanner(t, rs)
	whole := newTestScanner(t, rs)
	whole.wholeBlob = true

	g := newGen(8)
	pieces := []string{
		"token", "TOKEN", "abc", "secret", "Secret", "key_", "pass", "PASS", "ab_", "cd_", "x", "yy", "é", "éé",
		"\xff", " ", " ", "  ", "\n", "\n", "\r\n", "=", ":", "\"", "'", "_", "-", ".", "/", "@", "1", "42",
		"password", "api_key", "aws", "secret_access", "-----BEGIN RSA PRIVATE KEY-----\n",
		"postgres://", "sk-", "proj-", "T3BlbkFJ", "ghp_", "AKIA", "eyJ", "hvs.", "key-",
	}
	positives := secretSamples()
	rounds := 1500
	if raceEnabled {
		rounds = 150 // the whole-blob runs are slow under the race detector
	}
	findings := 0
	for round := 0; round < rounds; round++ {
		var b strings.Builder
		for n := g.r.IntN(400); n > 0; n-- {
			switch g.r.IntN(10) {
			case 0:
				b.WriteString(g.s(alnumChars, 1+g.r.IntN(50)))
			case 1:
				b.WriteString(g.s(lowerChars+digitChars, 1+g.r.IntN(10)))
			default:
				b.WriteString(pieces[g.r.IntN(len(pieces))])
			}
			if g.r.IntN(60) == 0 {
				b.WriteString(positives[g.r.IntN(len(positives))].text)
			}
		}
		blob := []byte(b.String())
		w, h := anchored.Scan("f", blob, ""), whole.Scan("f", blob, "")
		if !reflect.DeepEqual(w, h) {
			t.Fatalf("round %d: anchored and whole-blob results differ on %q:\nanchored %v\nwhole    %v", round, blob, w.Findings, h.Findings)
		}
		findings += len(h.Findings)
	}
	if findings < 5*rounds {
		t.Fatalf("only %d findings in all rounds: the test exercises too little", findings)
	}
	t.Logf("%d findings compared", findings)
}

// gitleaks' own rules run anchored too, most of them with their leading
// run split off (leadRun): on random text rich in their keywords, with
// runs of word characters before them and the non-ASCII runes (?i) folds
// into \w, anchored matching finds exactly what a whole-blob run finds.
func TestAnchoredEqualsWholeGitleaksRules(t *testing.T) {
	rs, err := LoadFile(gitleaksConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	var split int
	var pieces []string
	for _, cr := range rs.rules {
		if cr.plan != nil && cr.plan.lead != nil {
			split++
		}
		for _, k := range cr.Keywords {
			pieces = append(pieces, k, strings.ToUpper(k))
		}
	}
	if split < 50 {
		t.Fatalf("only %d rules have their leading run split off", split)
	}
	pieces = append(pieces, " ", " ", "\n", "\n", "=", ":", ": ", " = ", ":=", "=>", "\"", "'", "`", ",", ";", "_", "-", ".",
		"ſ", "K", "é", "\xff", "=\"", "\\n")
	anchored := newTestScanner(t, rs).WithDecodeDepth(0)
	whole := newTestScanner(t, rs).WithDecodeDepth(0)
	whole.wholeBlob = true
	// Out of time after 16 attempts, it goes on with a whole-blob run.
	hurried := newTestScanner(t, rs).WithDecodeDepth(0)
	hurried.budget = func(int) time.Duration { return 0 }
	g := newGen(18)
	rounds := 80 // the whole-blob runs take most of the time
	if raceEnabled {
		rounds = 20
	}
	findings := 0
	for round := 0; round < rounds; round++ {
		var b strings.Builder
		for n := g.r.IntN(300); n > 0; n-- {
			switch g.r.IntN(7) {
			case 0:
				b.WriteString(g.s(alnumChars, 1+g.r.IntN(40)))
			case 1:
				b.WriteString(g.s(lowerChars+"_.-", 1+g.r.IntN(60)))
			case 2: // an assignment after a long run, which may hold ſ or K
				b.WriteString(g.s(lowerChars+"_.-", 40+g.r.IntN(20)))
				if g.r.IntN(4) == 0 {
					b.WriteString(pieces[len(pieces)-6+g.r.IntN(2)] + g.s(lowerChars, g.r.IntN(3)))
				}
				b.WriteString(pieces[g.r.IntN(len(pieces))] + "=" + g.mixed(12+g.r.IntN(20)) + "\n")
			default:
				b.WriteString(pieces[g.r.IntN(len(pieces))])
			}
		}
		blob := []byte(b.String())
		// The findings as matched, before de-duplication, with
		// where each match starts.
		w, h := rawMatches(anchored, blob), rawMatches(whole, blob)
		if !reflect.DeepEqual(w, h) {
			t.Fatalf("round %d: anchored and whole-blob matches differ on %q:\nanchored %v\nwhole    %v", round, blob, w, h)
		}
		if u := rawMatches(hurried, blob); !reflect.DeepEqual(u, h) {
			t.Fatalf("round %d: anchored out of time and whole-blob matches differ on %q:\nhurried %v\nwhole   %v", round, blob, u, h)
		}
		findings += len(h)
	}
	if findings < 2*rounds {
		t.Fatalf("only %d findings in all rounds: the test exercises too little", findings)
	}
	t.Logf("%d rules split, %d findings compared", split, findings)
}

// rawMatches runs the content rules over content and returns their
// findings as matched (allowlists applied), sorted: before required rules
// and de-duplication.
func rawMatches(s *Scanner, content []byte) []rawFinding {
	sc := s.pool.Get().(*scratch)
	defer s.put(sc)
	s.scanText(sc, "f", "", content)
	if len(sc.raw) == 0 {
		return nil
	}
	out := slices.Clone(sc.raw)
	slices.SortFunc(out, func(x, y rawFinding) int {
		if x.rule != y.rule {
			return int(x.rule - y.rule)
		}
		return x.mstart - y.mstart
	})
	return out
}

func mustParse(t *testing.T, expr string) *syntax.Regexp {
	t.Helper()
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	return re
}
