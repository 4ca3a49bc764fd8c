package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// maxEcho is how much of one argument an error message repeats: enough to
// recognize it, not a screenful (a 5,000-character argument once filled
// 10 KB of stderr).
const maxEcho = 80

// errorLine is the one line the command prints for err: every argument
// longer than maxEcho shortened wherever the message repeats it, and
// control characters escaped, so a newline in an argument cannot forge a
// line of output and an escape cannot repaint the terminal.
func errorLine(err error, args []string) string {
	msg := err.Error()
	for _, a := range args {
		if len(a) > maxEcho {
			msg = strings.ReplaceAll(msg, a, shorten(a))
		}
	}
	return escapeControl(msg)
}

// shorten is the start of s and how long it was.
func shorten(s string) string {
	cut := maxEcho
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%s characters)", s[:cut], thousands(int64(len([]rune(s)))))
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// escapeControl writes control characters as Go escapes ("\n", "\x1b").
func escapeControl(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
