// Package report writes findings in the formats other tools read: SARIF
// 2.1.0 (GitHub code scanning), gitleaks' JSON report and CSV. Every
// writer streams: each occurrence is written as it comes and nothing is
// kept but the rules, so a report of a million occurrences takes the
// memory of one. No writer ever has the secret to write: an occurrence
// carries its keyed hash and a redacted preview only.
package report

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/url"
	"strings"

	"gitfleet/internal/domain/suppress"
)

// Rule is what a report says of a rule.
type Rule struct {
	ID          string
	Description string
	Tags        []string
}

// Occurrence is one finding of a secret, with where its secret stands.
type Occurrence struct {
	// Repository names the repository ("github.com/octocat/hello") or the
	// scan target it is in.
	Repository string
	// Link is a web page of the file at the commit, where the host has
	// one (gitleaks' Link); empty otherwise.
	Link   string
	RuleID string
	// Path is the file's path in the commit; Archive the path of the file
	// inside it when it is an archive (see store.Location).
	Path, Archive string
	// Line is the secret's first line (0 for a path-only rule).
	Line   int
	Commit string
	// SecretHash is the keyed hash of the secret ("" for a path-only
	// rule, whose secret is its path), Preview a redacted preview.
	SecretHash, Preview string
	// Decoded names the encodings undone to reach the secret.
	Decoded string
	// Status: present, removed or unknown at the scanned tips.
	Status string
	// State is the secret's triage state (open, revoked, false_positive,
	// used_in_tests, wont_fix); SeenAgain that it was met in a new commit
	// after it was resolved.
	State     string
	SeenAgain bool
	// Ignored is why a suppression the repository keeps applies, or "".
	Ignored suppress.Cause
	// Validity is what the last check with the secret's provider found
	// (valid, invalid, unknown; "" when never checked); TestKey that the
	// provider called it a test-mode key.
	Validity string
	TestKey  bool
	// Gitleaks is what gitleaks' git scan says of the finding beyond what
	// gitfleet keeps, read from the repository at export time; nil when
	// the repository could not be read (the gitleaks report then has
	// zero columns, entropy and commit metadata).
	Gitleaks *GitleaksDetail
}

// GitleaksDetail holds the fields of gitleaks' report.Finding that gitleaks
// compares when it reads a report as a baseline (detect.IsNew), as
// `gitleaks git` computes them for the commit that added the secret: the
// match's end line and columns in the diff fragment, the secret's Shannon
// entropy, and the commit's author, email, date (RFC 3339, UTC) and
// message. None of them is the secret.
type GitleaksDetail struct {
	EndLine, StartColumn, EndColumn int
	Entropy                         float32
	Author, Email, Date, Message    string
}

// File is the finding's file as gitleaks names it: a file in an archive
// after the archive's path and "!".
func (o Occurrence) File() string {
	if o.Archive == "" {
		return o.Path
	}
	return o.Path + "!" + o.Archive
}

// Fingerprint is gitleaks' fingerprint of the occurrence, the one a
// .gitleaksignore line holds.
func (o Occurrence) Fingerprint() string {
	return suppress.Fingerprint(o.Commit, o.File(), o.RuleID, o.Line)
}

// SecretFingerprint identifies the secret, the same in every occurrence
// and every report, whatever rules scanned it and whatever the repository
// is called: a digest of the rule and the keyed hash (for a path-only
// rule, the path). It says nothing the hash does not.
func (o Occurrence) SecretFingerprint() string {
	secret := o.SecretHash
	if secret == "" {
		secret = "path:" + o.File()
	}
	sum := sha256.Sum256([]byte(o.RuleID + "\x00" + secret))
	return hex.EncodeToString(sum[:16])
}

// Resolved reports whether the secret's state is a resolution.
func (o Occurrence) Resolved() bool { return o.State != "" && o.State != "open" }

// Dismissed reports whether a report tells the receiving tool the secret
// is dealt with: resolved and not met again since. A secret seen again
// after its resolution is exposed anew, so every occurrence of it is open
// until someone resolves it again (code scanning keeps one alert per
// secret, by its fingerprint: one accepted result would close it).
func (o Occurrence) Dismissed() bool { return o.Resolved() && !o.SeenAgain }

// Writer writes occurrences as they come; Close ends the report (a writer
// that is not closed leaves an incomplete document).
type Writer interface {
	Write(Occurrence) error
	Close() error
}

// Formats are the formats New knows.
var Formats = []string{"sarif", "gitleaks", "csv"}

// New makes a writer of format (one of Formats) to w; rules name the
// rules occurrences may refer to, in the order a SARIF report lists them.
// It reports false for an unknown format.
func New(format string, w io.Writer, tool Tool, rules []Rule) (Writer, bool, error) {
	switch format {
	case "sarif":
		sw, err := NewSARIF(w, tool, rules)
		return sw, true, err
	case "gitleaks":
		return NewGitleaks(w, rules), true, nil
	case "csv":
		cw, err := NewCSV(w)
		return cw, true, err
	}
	return nil, false, nil
}

// Tool names the program writing a report.
type Tool struct {
	Name, Version, InformationURI string
}

// uri is a path as a relative URI reference: escaped, and kept from
// reading as a scheme.
func uri(path string) string {
	return (&url.URL{Path: strings.TrimPrefix(path, "/")}).String()
}

// rulesByID indexes rules.
func rulesByID(rules []Rule) map[string]int {
	m := make(map[string]int, len(rules))
	for i, r := range rules {
		m[r.ID] = i
	}
	return m
}
