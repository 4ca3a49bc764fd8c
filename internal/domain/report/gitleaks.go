package report

import (
	"bufio"
	"encoding/json"
	"io"

	"gitfleet/internal/domain/textsafe"
)

// Redacted is what gitleaks --redact writes for a secret (and in a match).
const Redacted = "REDACTED"

// gitleaksFinding has the fields of gitleaks' report.Finding as its JSON
// report writes them (v8.30; Line and Fragment are not written).
type gitleaksFinding struct {
	RuleID      string
	Description string
	StartLine   int
	EndLine     int
	StartColumn int
	EndColumn   int
	Match       string
	Secret      string
	File        string
	SymlinkFile string
	Commit      string
	Link        string `json:",omitempty"`
	Entropy     float32
	Author      string
	Email       string
	Date        string
	Message     string
	Tags        []string
	Fingerprint string
}

// Gitleaks writes gitleaks' JSON report: an array of findings with its
// fields, Secret and Match redacted as `gitleaks --redact` writes them
// (gitfleet never has them to write). What gitleaks knows and gitfleet
// does not keep — columns, the end line, the commit's author, date and
// message, the entropy — is left at its zero value, the end line at the
// start line.
type Gitleaks struct {
	w     *bufio.Writer
	rules []Rule
	index map[string]int
	n     int
	err   error
}

// NewGitleaks starts a gitleaks report on w.
func NewGitleaks(w io.Writer, rules []Rule) *Gitleaks {
	return &Gitleaks{w: bufio.NewWriter(w), rules: rules, index: rulesByID(rules)}
}

// Write writes one finding.
func (g *Gitleaks) Write(o Occurrence) error {
	if g.err != nil {
		return g.err
	}
	f := gitleaksFinding{RuleID: o.RuleID, StartLine: o.Line, EndLine: o.Line, Match: Redacted, Secret: Redacted,
		File: o.File(), Commit: o.Commit, Link: o.Link, Tags: []string{}, Fingerprint: o.Fingerprint()}
	if o.SecretHash == "" { // a path-only rule: gitleaks reports the file, no secret
		f.Match, f.Secret = "", ""
	}
	if i, ok := g.index[o.RuleID]; ok {
		f.Description = g.rules[i].Description
		f.Tags = append(f.Tags, g.rules[i].Tags...)
	}
	b, err := json.MarshalIndent(f, " ", " ")
	if err != nil {
		g.err = err
		return err
	}
	b = textsafe.EscapeJSON(b)
	sep := ",\n "
	if g.n == 0 {
		sep = "[\n "
	}
	g.n++
	if _, g.err = io.WriteString(g.w, sep); g.err == nil {
		_, g.err = g.w.Write(b)
	}
	return g.err
}

// Close ends the array.
func (g *Gitleaks) Close() error {
	if g.err != nil {
		return g.err
	}
	end := "\n]\n"
	if g.n == 0 {
		end = "[]\n"
	}
	if _, err := io.WriteString(g.w, end); err != nil {
		return err
	}
	return g.w.Flush()
}
