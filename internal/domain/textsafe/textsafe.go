package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Printable returns s with every byte a terminal could act on written as an
// escape: C0 controls (newline and tab included) and DEL as \x1b, C1
// controls and other invisible runes (bidirectional overrides, zero-width
// and line/paragraph separators, private use, unassigned) as \u202e, and
// bytes that are not UTF-8 as \xff. Printable Unicode, spaces included, is
// kept as it is, so a name in any script still reads as itself.
//
// The result is for display only: a backslash is kept as it is, so the
// escaping cannot be undone unambiguously. Text that needs no escape is
// returned without copying.
func Printable(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !safe(r) && r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !safe(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !safe(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the offset of the first byte Printable must escape, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !safe(r) {
			return i
		}
		i += size
	}
	return -1
}

// safe reports whether a terminal shows r as a glyph or a space: C0, DEL and
// C1 are controls, and the format characters (Cf: bidirectional overrides
// that reorder what follows, zero-width characters that hide it), line and
// paragraph separators, private-use and unassigned code points are not
// graphic either.
func safe(r rune) bool {
	if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
		return false
	}
	return unicode.IsGraphic(r)
}

// EscapeJSON returns encoded JSON (as encoding/json writes it: C0 already
// escaped) with every other rune a terminal could act on — C1 controls,
// bidirectional overrides, zero-width and separator characters — written
// as a \u escape. The JSON decodes to the same values; only its bytes are
// safe to show. JSON that needs no escape is returned as it is.
func EscapeJSON(b []byte) []byte {
	var out []byte
	done := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 || safe(r) {
			i += size // encoding/json writes invalid UTF-8 as U+FFFD already
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b)+16)
		}
		out = append(out, b[done:i]...)
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
		done = i
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}
