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
// (gitfleet never has them to write). The columns, end line, entropy and
// commit metadata come from the occurrence's Gitleaks detail; without one
// they are left at their zero value, the end line at the start line.
//
// As a baseline (`gitleaks git --baseline-path`), gitleaks v8.30 takes a
// finding as known when every field but Fingerprint, Tags and Link equals
// the baseline's, Secret and Match included unless it runs with --redact:
// the report serves as a baseline for `gitleaks ... --redact` only, which
// is the safe way, since a baseline with the secrets would be one more
// copy of them.
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
	if d := o.Gitleaks; d != nil {
		f.EndLine, f.StartColumn, f.EndColumn, f.Entropy = d.EndLine, d.StartColumn, d.EndColumn, d.Entropy
		f.Author, f.Email, f.Date, f.Message = d.Author, d.Email, d.Date, d.Message
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
