package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"gitfleet/internal/domain/textsafe"
)

// SARIFSchema is the schema a SARIF report names.
const SARIFSchema = "https://json.schemastore.org/sarif-2.1.0.json"

// FingerprintKey names the partialFingerprints entry that identifies a
// secret: code scanning takes results with the same one as one alert.
const FingerprintKey = "gitfleetSecret/v1"

type sarifRule struct {
	ID               string         `json:"id"`
	ShortDescription *sarifMessage  `json:"shortDescription,omitempty"`
	Properties       sarifRuleProps `json:"properties"`
}

type sarifRuleProps struct {
	Tags []string `json:"tags"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID              string             `json:"ruleId"`
	RuleIndex           *int               `json:"ruleIndex,omitempty"`
	Level               string             `json:"level"`
	Message             sarifMessage       `json:"message"`
	Locations           []sarifLocation    `json:"locations"`
	PartialFingerprints map[string]string  `json:"partialFingerprints"`
	Suppressions        []sarifSuppression `json:"suppressions,omitempty"`
	Properties          sarifResultProps   `json:"properties"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

type sarifSuppression struct {
	Kind          string `json:"kind"`
	Status        string `json:"status,omitempty"`
	Justification string `json:"justification,omitempty"`
}

type sarifResultProps struct {
	Repository string `json:"repository,omitempty"`
	Commit     string `json:"commit,omitempty"`
	SecretHash string `json:"secretHash,omitempty"`
	Preview    string `json:"preview,omitempty"`
	Decoded    string `json:"decoded,omitempty"`
	Status     string `json:"status,omitempty"`
	State      string `json:"state,omitempty"`
	SeenAgain  bool   `json:"seenAgainAfterResolution,omitempty"`
	// ArchiveEntry and ArchiveLine say where in an archive (the result's
	// file) the secret is: a path inside it is no file of the repository,
	// and one holding "../" would resolve outside a checkout.
	ArchiveEntry string `json:"archiveEntry,omitempty"`
	ArchiveLine  int    `json:"archiveLine,omitempty"`
}

// SARIF writes a SARIF 2.1.0 log: one run, the rules as
// tool.driver.rules, one result per occurrence at its file and line, a
// partialFingerprints entry (FingerprintKey) per secret. A suppressed
// occurrence carries a suppression: inSource for gitleaks:allow, external
// for .gitleaksignore and for a resolved secret (accepted, the reason as
// justification), which is how code scanning learns it is dismissed.
type SARIF struct {
	w     *bufio.Writer
	rules map[string]int
	n     int
	err   error
}

// NewSARIF starts a SARIF log on w; rules are written at once, results
// as they come.
func NewSARIF(w io.Writer, tool Tool, rules []Rule) (*SARIF, error) {
	s := &SARIF{w: bufio.NewWriter(w), rules: rulesByID(rules)}
	sr := make([]sarifRule, len(rules))
	for i, r := range rules {
		sr[i] = sarifRule{ID: r.ID, Properties: sarifRuleProps{Tags: append([]string{"security", "secret"}, r.Tags...)}}
		if r.Description != "" {
			sr[i].ShortDescription = &sarifMessage{Text: r.Description}
		}
	}
	driver := struct {
		Name           string      `json:"name"`
		Version        string      `json:"version,omitempty"`
		InformationURI string      `json:"informationUri,omitempty"`
		Rules          []sarifRule `json:"rules"`
	}{tool.Name, tool.Version, tool.InformationURI, sr}
	d, err := json.Marshal(driver)
	if err != nil {
		return nil, err
	}
	d = textsafe.EscapeJSON(d)
	fmt.Fprintf(s.w, "{\n  \"$schema\": %q,\n  \"version\": \"2.1.0\",\n  \"runs\": [\n    {\n      \"tool\": {\"driver\": %s},\n      \"results\": [", SARIFSchema, d)
	return s, nil
}

// Write writes one result.
func (s *SARIF) Write(o Occurrence) error {
	if s.err != nil {
		return s.err
	}
	// The location is always a file of the repository: a secret inside
	// an archive is at the archive, its entry and line in properties.
	r := sarifResult{RuleID: o.RuleID, Level: "error",
		Message:             sarifMessage{Text: sarifText(o)},
		Locations:           []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri(o.Path)}}}},
		PartialFingerprints: map[string]string{FingerprintKey: o.SecretFingerprint()},
		Properties: sarifResultProps{Repository: o.Repository, Commit: o.Commit, SecretHash: o.SecretHash, Preview: o.Preview,
			Decoded: o.Decoded, Status: o.Status, State: o.State, SeenAgain: o.SeenAgain},
	}
	if i, ok := s.rules[o.RuleID]; ok {
		r.RuleIndex = &i
	}
	switch {
	case o.Archive != "":
		r.Properties.ArchiveEntry, r.Properties.ArchiveLine = o.Archive, o.Line
	case o.Line > 0:
		r.Locations[0].PhysicalLocation.Region = &sarifRegion{StartLine: o.Line}
	}
	switch o.Ignored {
	case "":
	case "gitleaks:allow":
		r.Suppressions = append(r.Suppressions, sarifSuppression{Kind: "inSource", Justification: string(o.Ignored)})
	default:
		r.Suppressions = append(r.Suppressions, sarifSuppression{Kind: "external", Justification: string(o.Ignored)})
	}
	if o.Resolved() {
		r.Suppressions = append(r.Suppressions, sarifSuppression{Kind: "external", Status: "accepted", Justification: o.State})
	}
	b, err := json.Marshal(r)
	if err != nil {
		s.err = err
		return err
	}
	b = textsafe.EscapeJSON(b)
	sep := ","
	if s.n == 0 {
		sep = ""
	}
	s.n++
	_, s.err = fmt.Fprintf(s.w, "%s\n        %s", sep, b)
	return s.err
}

// Close ends the log.
func (s *SARIF) Close() error {
	if s.err != nil {
		return s.err
	}
	if _, err := io.WriteString(s.w, "\n      ]\n    }\n  ]\n}\n"); err != nil {
		return err
	}
	return s.w.Flush()
}

func sarifText(o Occurrence) string {
	t := fmt.Sprintf("%s: a secret (%s) in %s", o.RuleID, o.Preview, o.File())
	if o.Preview == "" {
		t = fmt.Sprintf("%s: %s", o.RuleID, o.File())
	}
	if o.Line > 0 {
		t += fmt.Sprintf(":%d", o.Line)
	}
	if o.Commit != "" {
		t += " at commit " + o.Commit
	}
	if o.Repository != "" {
		t += " in " + o.Repository
	}
	return t + "."
}
