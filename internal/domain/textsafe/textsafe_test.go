package textsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain ASCII", "registry.example:5000/app@sha256:ab", "registry.example:5000/app@sha256:ab"},
		{"spaces and punctuation kept", `a b\c "d" 'e' ~`, `a b\c "d" 'e' ~`},
		{"printable Unicode kept", "dépôt/日本語/ключ/😀", "dépôt/日本語/ключ/😀"},
		{"no-break space kept", "a\u00a0b", "a\u00a0b"},
		{"escape sequence", "pull failed\x1b[2J\x1b[H: ok", `pull failed\x1b[2J\x1b[H: ok`},
		{"window title (OSC)", "\x1b]0;owned\x07", `\x1b]0;owned\x07`},
		{"NUL", "a\x00b", `a\x00b`},
		{"newline, carriage return and tab", "a\nb\rc\td", `a\x0ab\x0dc\x09d`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as a rune", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"bidirectional override", "safe\u202egnp.exe", `safe\u202egnp.exe`},
		{"bidirectional isolate", "\u2066x\u2069", `\u2066x\u2069`},
		{"zero width space", "ad\u200bmin", `ad\u200bmin`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"private use outside the BMP", "a\U000F0000b", `a\U000f0000b`},
		{"invalid UTF-8 byte", "a\xffb", `a\xffb`},
		{"lone C1 byte (invalid UTF-8)", "a\x9b2Jb", `a\x9b2Jb`},
		{"truncated sequence", "é\xc3", `é\xc3`},
		{"surrogate half encoded", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"escape at the end", "end\x1b", `end\x1b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Printable(tc.in)
			if got != tc.want {
				t.Fatalf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Printable(%q) = %q is not valid UTF-8", tc.in, got)
			}
			if strings.ContainsFunc(got, func(r rune) bool { return !safe(r) }) {
				t.Errorf("Printable(%q) = %q still holds a control or invisible rune", tc.in, got)
			}
		})
	}
}

// Every byte string comes out valid, printable and unchanged where it was
// already safe.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31mred", "\xff\xfe", "a\u202eb", "日本\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Printable(s)
		if !utf8.ValidString(got) || strings.ContainsFunc(got, func(r rune) bool { return !safe(r) }) {
			t.Fatalf("Printable(%q) = %q", s, got)
		}
		if firstUnsafe(s) < 0 && got != s {
			t.Fatalf("Printable(%q) changed safe text to %q", s, got)
		}
	})
}

func TestPrintableDoesNotCopySafeText(t *testing.T) {
	s := strings.Repeat("gitfleet/ü ", 100)
	if n := testing.AllocsPerRun(100, func() { _ = Printable(s) }); n != 0 {
		t.Errorf("Printable of safe text allocates %v times", n)
	}
}
