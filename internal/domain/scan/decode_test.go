package scan

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fakePAT is a GitHub-classic-shaped token built at run time.
func fakePAT(g *gen) string { return "gh" + "p_" + g.mixed(36) }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// percentAll percent-encodes every byte of s.
func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// decodeRules are gitleaks' maintained rules without generic-api-key: the
// encoded spans of these tests sit after words like "auth:" and "key =",
// where the generic rule would report the encoded text itself, as gitleaks
// does, and each case would need to list it.
const decodeRules = `
[extend]
useDefault = true
disabledRules = ["generic-api-key"]
`

// decodeScanner is decodeRules with decoding depth levels deep, and a
// count of the decoded segments it scans.
func decodeScanner(t testing.TB, depth int) (*Scanner, *int) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DecodeDepth = depth
	s, err := New(mustLoad(t, decodeRules), cfg, testKey)
	if err != nil {
		t.Fatal(err)
	}
	n := new(int)
	s.onDecode = func(string, int) { *n++ }
	return s, n
}

func TestDecodedSecrets(t *testing.T) {
	g := newGen(7)
	tok := fakePAT(g)
	plain, _ := decodeScanner(t, 0)
	want := plain.Scan("a.txt", []byte(tok), "").Findings
	if len(want) != 1 || want[0].RuleID != "github-pat" {
		t.Fatalf("the plain token: %+v", want)
	}
	wantHash := want[0].SecretHash

	type expect struct {
		rule    string
		decoded string
		depth   int
		span    string // the encoded span the finding must point at
	}
	urlTok := base64.RawURLEncoding.EncodeToString([]byte("token=" + tok))
	pct := "gh" + "p%5F" + tok[4:]
	cases := []struct {
		name  string
		depth int
		blob  string
		want  []expect
	}{
		{"base64", 5, "config:\n  auth: " + b64(tok) + "\n", []expect{{"github-pat", "base64", 1, b64(tok)}}},
		{"base64 url, unpadded", 5, "x=" + urlTok + ";", []expect{{"github-pat", "base64", 1, urlTok}}},
		{"base64 twice", 5, "v: \"" + b64(b64(tok)) + "\"", []expect{{"github-pat", "base64/base64", 2, b64(b64(tok))}}},
		{"base64 twice, depth 1", 1, "v: \"" + b64(b64(tok)) + "\"", nil},
		{"hex", 5, "key = " + hex.EncodeToString([]byte(tok)), []expect{{"github-pat", "hex", 1, hex.EncodeToString([]byte(tok))}}},
		{"hex in base64", 5, "k: " + b64(hex.EncodeToString([]byte(tok))), []expect{{"github-pat", "base64/hex", 2, b64(hex.EncodeToString([]byte(tok)))}}},
		{"percent", 5, "https://example.com/cb?t=" + pct + "&x=1", []expect{{"github-pat", "percent", 1, "%5F"}}},
		{"percent, every byte", 5, "q=" + percentAll(tok), []expect{{"github-pat", "percent", 1, percentAll(tok)}}},
		{"depth 0", 0, "auth: " + b64(tok), nil},
		{"plain", 5, "token: " + tok + "\n", []expect{{"github-pat", "", 0, tok}}},
		{"plain, in a percent-encoded line", 5, "u=a%20b&t=" + tok + "&v=c%20d\n", []expect{{"github-pat", "", 0, tok}}},
		{"plain and encoded", 5, "a: " + tok + "\nb: " + b64(tok) + "\n",
			[]expect{{"github-pat", "", 0, tok}, {"github-pat", "base64", 1, b64(tok)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := decodeScanner(t, c.depth)
			got := s.Scan("a.txt", []byte(c.blob), "").Findings
			if len(got) != len(c.want) {
				t.Fatalf("%d findings, want %d: %+v", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				f := got[i]
				if f.RuleID != w.rule || f.Decoded != w.decoded || f.DecodeDepth != w.depth {
					t.Errorf("finding %d: %s decoded %q depth %d, want %s %q %d", i, f.RuleID, f.Decoded, f.DecodeDepth, w.rule, w.decoded, w.depth)
				}
				if f.SecretHash != wantHash {
					t.Errorf("finding %d: the hash is not the decoded token's", i)
				}
				start := strings.Index(c.blob, w.span)
				if f.Start != start || f.End != start+len(w.span) {
					t.Errorf("finding %d at [%d,%d), want the span [%d,%d)", i, f.Start, f.End, start, start+len(w.span))
				}
				line := strings.Count(c.blob[:start], "\n") + 1
				col := start - (strings.LastIndexByte(c.blob[:start], '\n') + 1) + 1
				if f.Line != line || f.Column != col {
					t.Errorf("finding %d at %d:%d, want %d:%d", i, f.Line, f.Column, line, col)
				}
				assertNoSecret(t, f, tok)
			}
		})
	}
}

func TestDecodeBinaryAndNoise(t *testing.T) {
	g := newGen(9)
	bin := make([]byte, 3000)
	for i := range bin {
		bin[i] = byte(g.r.IntN(256))
	}
	blobs := map[string]string{
		"base64 of binary": "data: " + base64.StdEncoding.EncodeToString(bin) + "\n",
		"hex of binary":    "sum " + hex.EncodeToString(bin[:64]) + "\n",
		"both alphabets":   "x " + g.s(b64Chars, 40) + "_-" + g.s(b64Chars, 40),
		"format verbs":     strings.Repeat(`fmt.Printf("%02x %2d %5F %%", a, b)`+"\n", 50),
		"broken escapes":   "%%%%%4%g%\n%",
		"padding only":     "================ ==",
		"at the very end":  "x=" + b64("abc")[:3],
	}
	for name, blob := range blobs {
		t.Run(name, func(t *testing.T) {
			s, n := decodeScanner(t, 5)
			if got := s.Scan("a.txt", []byte(blob), "").Findings; len(got) != 0 {
				t.Errorf("findings: %+v", got)
			}
			if strings.Contains(name, "binary") && *n != 0 {
				t.Errorf("%d decoded segments scanned, want 0", *n)
			}
		})
	}
}

// Many small spans that decode to text: the work stays under the caps.
func TestDecodeBounded(t *testing.T) {
	g := newGen(11)
	tok := fakePAT(g)
	var b strings.Builder
	for b.Len() < 4<<20 {
		b.WriteString(b64(b64("word " + g.s(alnumChars, 10))))
		b.WriteByte(' ')
	}
	b.WriteString(b64(tok)) // past the caps: not decoded
	blob := []byte(b.String())
	s, n := decodeScanner(t, 5)
	got := s.Scan("a.txt", blob, "")
	if *n == 0 || *n > maxDecodeSegments {
		t.Errorf("%d decoded segments scanned, want 1..%d", *n, maxDecodeSegments)
	}
	for _, f := range got.Findings {
		if f.RuleID == "github-pat" {
			t.Errorf("a finding past the caps: %+v", f)
		}
	}
	// One long span is cut, not skipped nor decoded whole.
	long := "x: " + b64(strings.Repeat("lorem ipsum ", 3*maxSpanLen/16)+tok)
	*n = 0
	s.Scan("a.txt", []byte(long), "")
	if *n == 0 {
		t.Error("a long span is not decoded at all")
	}
}

func TestDecodePolicy(t *testing.T) {
	s0, _ := decodeScanner(t, 0)
	s2, _ := decodeScanner(t, 2)
	s5, _ := decodeScanner(t, 5)
	if s0.Policy() == s2.Policy() || s2.Policy() == s5.Policy() {
		t.Error("the policy does not depend on the decode depth")
	}
	if d := newTestScanner(t, mustDefault(t)).Config().DecodeDepth; d != DefaultDecodeDepth {
		t.Errorf("default depth %d", d)
	}
	if w := s0.WithDecodeDepth(5); w.Policy() != s5.Policy() || w.Config().DecodeDepth != 5 {
		t.Error("WithDecodeDepth(5) is not a depth-5 scanner")
	}
	if w := s5.WithDecodeDepth(-1); w.Config().DecodeDepth != 0 || w.Policy() != s0.Policy() {
		t.Error("a negative depth does not disable decoding")
	}
}

// findSpans against a plain reading of its specification.
func TestFindSpans(t *testing.T) {
	run := regexp.MustCompile(`[A-Za-z0-9+/_-]{16,}`)
	pctLine := regexp.MustCompile(`%[0-9A-Fa-f]{2}(?:.*%[0-9A-Fa-f]{2})?`)
	g := newGen(13)
	alphabet := "aZ09+/_-=% \n.fF"
	for iter := 0; iter < 3000; iter++ {
		text := []byte(g.s(alphabet[:1+g.r.IntN(len(alphabet))], g.r.IntN(200)))
		if iter%3 == 0 {
			text = []byte(g.s("abcdef0123", 1+g.r.IntN(40)) + " " + g.s(b64Chars+" ", g.r.IntN(120)))
		}
		var want []encSpan
		for _, m := range run.FindAllIndex(text, -1) {
			want = classifyRun(want, text, m[0], m[1], len(text))
		}
		for _, m := range pctLine.FindAllIndex(text, -1) {
			want = append(want, encSpan{m[0], m[1], encPercent})
		}
		got := findSpans(nil, text, 0, len(text))
		if !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", text, got, want)
		}
	}
}
