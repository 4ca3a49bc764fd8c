// Package suppress holds the suppressions users keep for gitleaks, applied
// as gitleaks applies them: the fingerprints of a .gitleaksignore file and
// the inline "gitleaks:allow" comment. A suppressed finding is kept and
// marked with its Cause, not dropped: a security team can still see what
// a repository chose to ignore.
package suppress

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Cause says why a finding is suppressed.
type Cause string

const (
	// None: the finding is not suppressed.
	None Cause = ""
	// Inline: the matched line carries "gitleaks:allow".
	Inline Cause = "gitleaks:allow"
	// IgnoreFile: a fingerprint in the .gitleaksignore at the root of a
	// scanned ref's tip names the finding.
	IgnoreFile Cause = ".gitleaksignore"
)

// IgnoreFileName is the file gitleaks reads fingerprints from, at the root
// of the scanned tree.
const IgnoreFileName = ".gitleaksignore"

// AllowSignature is gitleaks' inline allow comment (detect.gitleaksAllowSignature).
const AllowSignature = "gitleaks:allow"

// MaxIgnoreBytes bounds the .gitleaksignore read from one tip: a file of
// fingerprints is small, and a repository is not trusted to keep it so.
const MaxIgnoreBytes = 1 << 20

// Ignore is a set of gitleaks fingerprints.
type Ignore map[string]struct{}

// ParseIgnore reads a .gitleaksignore as gitleaks' Detector.AddGitleaksIgnore
// does (v8.30): one fingerprint per line, blank lines and lines starting
// with '#' skipped, surrounding space trimmed, the path's backslashes made
// slashes in the two forms it knows — "file:rule-id:start-line" (3 parts)
// and "commit:file:rule-id:start-line" (4 parts). gitleaks keeps a line of
// another shape as it is (it warns and can never match it); so does this,
// counting it in invalid. gitleaks' function reads a file into an
// unexported map, so it cannot be called from here; parity is tested
// against the gitleaks binary.
func ParseIgnore(content []byte) (ig Ignore, invalid int) {
	ig = Ignore{}
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(nil, MaxIgnoreBytes)
	slash := strings.NewReplacer(`\`, "/")
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := strings.Split(line, ":")
		switch len(s) {
		case 3:
			s[0] = slash.Replace(s[0])
		case 4:
			s[1] = slash.Replace(s[1])
		default:
			invalid++
		}
		ig[strings.Join(s, ":")] = struct{}{}
	}
	return ig, invalid
}

// Add adds the fingerprints of other (the ignore files of several tips
// together).
func (ig Ignore) Add(other Ignore) {
	for fp := range other {
		ig[fp] = struct{}{}
	}
}

// Fingerprints are ig's fingerprints, in no order.
func (ig Ignore) Fingerprints() []string {
	out := make([]string, 0, len(ig))
	for fp := range ig {
		out = append(out, fp)
	}
	return out
}

// Fingerprint is gitleaks' fingerprint of a finding: "commit:file:rule-id:line"
// in a commit, "file:rule-id:line" without one (a directory scan).
func Fingerprint(commit, file, ruleID string, line int) string {
	if commit == "" {
		return fmt.Sprintf("%s:%s:%d", file, ruleID, line)
	}
	return fmt.Sprintf("%s:%s:%s:%d", commit, file, ruleID, line)
}

// Match reports whether ig suppresses the finding, as gitleaks'
// Detector.AddFinding decides: the form without the commit, or the one
// with it.
func (ig Ignore) Match(commit, file, ruleID string, line int) bool {
	if _, ok := ig[Fingerprint("", file, ruleID, line)]; ok {
		return true
	}
	if commit == "" {
		return false
	}
	_, ok := ig[Fingerprint(commit, file, ruleID, line)]
	return ok
}

// InlineAllowed reports whether the lines of content holding the span
// [start, end) carry gitleaks:allow. gitleaks looks in its finding's Line:
// the text from the newline before the match to the newline (or carriage
// return, on the last line) after it; the span here is the secret's, which
// is within the match and on its lines in every rule but one spanning
// lines outside its secret.
func InlineAllowed(content []byte, start, end int) bool {
	if start < 0 || end > len(content) || start > end {
		return false
	}
	lo := bytes.LastIndexByte(content[:start], '\n')
	lo = max(lo, 0)
	hi := len(content)
	if i := bytes.IndexByte(content[end:], '\n'); i >= 0 {
		hi = end + i
	} else if i := bytes.IndexByte(content[end:], '\r'); i >= 0 {
		hi = end + i
	}
	return bytes.Contains(content[lo:hi], []byte(AllowSignature))
}
