package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

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
	FullDescription  *sarifMessage  `json:"fullDescription,omitempty"`
	Help             *sarifMessage  `json:"help,omitempty"`
	Properties       sarifRuleProps `json:"properties"`
}

type sarifRuleProps struct {
	Tags []string `json:"tags"`
	// SecuritySeverity is what code scanning ranks alerts by (see
	// RuleSeverity); Precision how often a finding is a real secret.
	SecuritySeverity string `json:"security-severity"`
	Precision        string `json:"precision"`
}

type sarifMessage struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

// ruleHelp is what code scanning shows beside an alert of r: what was
// found and what to do, as text and Markdown. It names no secret.
func ruleHelp(r Rule) *sarifMessage {
	what := r.Description
	if what == "" {
		what = "A secret matching the rule " + r.ID + "."
	}
	if !strings.HasSuffix(what, ".") {
		what += "."
	}
	const todo = "A secret in a repository's history is exposed to everyone who can read the repository, in every clone and fork, " +
		"even after the file is changed. Revoke or rotate it with its provider first, then remove it from the code " +
		"(and, if needed, from the history). Mark it in gitfleet once handled: " +
		"starter findings resolve REPOSITORY HASH --reason revoked (or false_positive, used_in_tests, wont_fix)."
	md := "**" + markdownEscape(what) + "**\n\n" +
		"A secret in a repository's history is exposed to everyone who can read the repository, in every clone and fork, " +
		"even after the file is changed.\n\n" +
		"1. Revoke or rotate it with its provider.\n" +
		"2. Remove it from the code (and, if needed, from the history).\n" +
		"3. Mark it in gitfleet: `starter findings resolve REPOSITORY HASH --reason revoked` " +
		"(or `false_positive`, `used_in_tests`, `wont_fix`).\n"
	return &sarifMessage{Text: what + " " + todo, Markdown: md}
}

// markdownEscape keeps a description from reading as Markdown.
func markdownEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]()<>#+-!|", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
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
	// Validity is the last check's state; SecuritySeverity the
	// occurrence's own (Occurrence.Severity): code scanning ranks an alert
	// by its rule's, so a valid key's result says it is critical here and
	// in its level.
	Validity         string `json:"validity,omitempty"`
	SecuritySeverity string `json:"security-severity"`
}

// GitHub code scanning's limits on an uploaded log
// (docs.github.com: "SARIF support for code scanning", upload limits): a
// file may hold at most MaxRunsPerFile runs and a run at most
// MaxResultsPerRun results, of which code scanning shows only the
// ShownResultsPerRun of highest severity. A log this package writes has
// one run, so only the results are counted.
const (
	MaxRunsPerFile     = 20
	MaxResultsPerRun   = 25000
	ShownResultsPerRun = 5000
)

// LimitError is a log refused at MaxResultsPerRun: code scanning rejects
// a run with more results, so none of it is usable.
type LimitError struct {
	// Repository names the log's repository ("" for a log of no one
	// repository).
	Repository string
}

func (e *LimitError) Error() string {
	what := "the SARIF log"
	if e.Repository != "" {
		what = e.Repository + "'s SARIF log"
	}
	return fmt.Sprintf("%s would hold more than %d results, the most GitHub code scanning takes in a run", what, MaxResultsPerRun)
}

// Repository is the repository a SARIF log describes, as
// versionControlProvenance names it: code scanning attaches a log's
// results to the files of one repository, so a log holds one.
type Repository struct {
	// Name is the occurrences' Repository ("github.com/acme/api"); every
	// occurrence written to the log must carry it.
	Name string
	// URI is the repository's absolute URI (https://github.com/acme/api,
	// or file:///srv/repos/tools for a local scan target).
	URI string
	// Commit is the commit scanned (the tip of Branch), Branch the ref
	// ("refs/heads/main"); either may be "" when unknown.
	Commit, Branch string
}

type sarifProvenance struct {
	RepositoryURI string `json:"repositoryUri"`
	RevisionID    string `json:"revisionId,omitempty"`
	Branch        string `json:"branch,omitempty"`
}

// SARIF writes a SARIF 2.1.0 log: one run, the rules as
// tool.driver.rules, one result per occurrence at its file and line, a
// partialFingerprints entry (FingerprintKey) per secret. A suppressed
// occurrence carries a suppression: inSource for gitleaks:allow, external
// for .gitleaksignore and for a resolved secret not seen again since
// (accepted, the reason as justification: see Occurrence.Dismissed), which
// is how code scanning learns it is dismissed.
// Write refuses the result past MaxResultsPerRun (a *LimitError).
type SARIF struct {
	w     *bufio.Writer
	rules map[string]int
	repo  string // with a repository: the only one a result may be of
	n     int
	err   error
}

// NewSARIF starts a SARIF log on w of no one repository (its results may
// be of several, which code scanning cannot attach to files: use
// NewRepositorySARIF for an upload); rules are written at once, results
// as they come.
func NewSARIF(w io.Writer, tool Tool, rules []Rule) (*SARIF, error) {
	return newSARIF(w, tool, rules, nil)
}

// NewRepositorySARIF starts the SARIF log of one repository, the log code
// scanning takes: its run names the repository, commit and branch
// (versionControlProvenance), and Write refuses an occurrence of another
// repository.
func NewRepositorySARIF(w io.Writer, tool Tool, rules []Rule, repo Repository) (*SARIF, error) {
	if repo.URI == "" {
		return nil, fmt.Errorf("SARIF of %q: no repository URI", repo.Name)
	}
	return newSARIF(w, tool, rules, &repo)
}

// WriteRepositorySARIF writes the complete SARIF log of one repository's
// occurrences to w (see NewRepositorySARIF); past MaxResultsPerRun it
// writes nothing and returns a *LimitError.
func WriteRepositorySARIF(w io.Writer, tool Tool, rules []Rule, repo Repository, occurrences []Occurrence) error {
	if len(occurrences) > MaxResultsPerRun {
		return &LimitError{Repository: repo.Name}
	}
	s, err := NewRepositorySARIF(w, tool, rules, repo)
	if err != nil {
		return err
	}
	for _, o := range occurrences {
		if err := s.Write(o); err != nil {
			return err
		}
	}
	return s.Close()
}

func newSARIF(w io.Writer, tool Tool, rules []Rule, repo *Repository) (*SARIF, error) {
	s := &SARIF{w: bufio.NewWriter(w), rules: rulesByID(rules)}
	sr := make([]sarifRule, len(rules))
	for i, r := range rules {
		precision := "high"
		if family(r.ID) == "generic" {
			precision = "medium"
		}
		sr[i] = sarifRule{ID: r.ID, Help: ruleHelp(r), Properties: sarifRuleProps{Tags: append([]string{"security", "secret"}, r.Tags...),
			SecuritySeverity: severityText(RuleSeverity(r.ID)), Precision: precision}}
		if r.Description != "" {
			sr[i].ShortDescription = &sarifMessage{Text: r.Description}
			sr[i].FullDescription = &sarifMessage{Text: r.Description}
		}
	}
	type driver struct {
		Name           string      `json:"name"`
		Version        string      `json:"version,omitempty"`
		InformationURI string      `json:"informationUri,omitempty"`
		Rules          []sarifRule `json:"rules"`
	}
	run := struct {
		Tool struct {
			Driver driver `json:"driver"`
		} `json:"tool"`
		Provenance []sarifProvenance `json:"versionControlProvenance,omitempty"`
	}{}
	run.Tool.Driver = driver{tool.Name, tool.Version, tool.InformationURI, sr}
	if repo != nil {
		s.repo = repo.Name
		run.Provenance = []sarifProvenance{{RepositoryURI: repo.URI, RevisionID: repo.Commit, Branch: repo.Branch}}
	}
	d, err := json.Marshal(run)
	if err != nil {
		return nil, err
	}
	d = textsafe.EscapeJSON(d)
	// The run's members but results, then results as they come.
	fmt.Fprintf(s.w, "{\n  \"$schema\": %q,\n  \"version\": \"2.1.0\",\n  \"runs\": [\n    %s,\n      \"results\": [", SARIFSchema, d[:len(d)-1])
	return s, nil
}

// Write writes one result.
func (s *SARIF) Write(o Occurrence) error {
	if s.err != nil {
		return s.err
	}
	if s.repo != "" && o.Repository != s.repo {
		return fmt.Errorf("SARIF log of %s: an occurrence of %s", s.repo, o.Repository)
	}
	if s.n == MaxResultsPerRun {
		s.err = &LimitError{Repository: s.repo}
		return s.err
	}
	// The location is always a file of the repository: a secret inside
	// an archive is at the archive, its entry and line in properties.
	r := sarifResult{RuleID: o.RuleID, Level: level(o.Severity()),
		Message:             sarifMessage{Text: sarifText(o)},
		Locations:           []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri(o.Path)}}}},
		PartialFingerprints: map[string]string{FingerprintKey: o.SecretFingerprint()},
		Properties: sarifResultProps{Repository: o.Repository, Commit: o.Commit, SecretHash: o.SecretHash, Preview: o.Preview,
			Decoded: o.Decoded, Status: o.Status, State: o.State, SeenAgain: o.SeenAgain, Validity: o.Validity,
			SecuritySeverity: severityText(o.Severity())},
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
	if o.Dismissed() {
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
