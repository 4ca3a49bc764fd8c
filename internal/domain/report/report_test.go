package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	gitleaksreport "github.com/zricethezav/gitleaks/v8/report"
)

const (
	hash1 = "5f0c7a1e2d3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
	hash2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

var rules = []Rule{
	{ID: "github-pat", Description: "Uncovered a GitHub Personal Access Token", Tags: []string{"github"}},
	{ID: "pkcs12-file", Description: "Found a PKCS #12 file"},
}

// occurrences are one of each kind a report must carry: plain, two
// occurrences of one secret, in an archive, decoded, path-only, a path
// needing escapes, suppressed inline and by a .gitleaksignore, resolved,
// and of a rule the report does not list.
func occurrences() []Occurrence {
	return []Occurrence{
		{Repository: "github.com/acme/api", Link: "https://github.com/acme/api/blob/c1/config/app.env#L3", RuleID: "github-pat",
			Path: "config/app.env", Line: 3, Commit: "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1", SecretHash: hash1, Preview: "ghp_…(40)", Status: "present", State: "open"},
		{Repository: "github.com/acme/api", RuleID: "github-pat", Path: "test/fixtures.go", Line: 12,
			Commit: "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2", SecretHash: hash1, Preview: "ghp_…(40)", Status: "removed", State: "revoked", SeenAgain: true},
		{Repository: "github.com/acme/api", RuleID: "github-pat", Path: "dist/app.jar", Archive: "config/app.env", Line: 1,
			Commit: "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3", SecretHash: hash2, Preview: "ghp_…(40)", Decoded: "base64", Status: "unknown"},
		{Repository: "/srv/repos/tools", RuleID: "pkcs12-file", Path: "keys/my cert:1.p12", Commit: "c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4"},
		{Repository: "github.com/acme/api", RuleID: "github-pat", Path: "=cmd|' /C calc'!A0", Line: 7, Commit: "c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5",
			SecretHash: hash2, Preview: "ghp_…(40)", Ignored: "gitleaks:allow"},
		{Repository: "github.com/acme/api", RuleID: "github-pat", Path: "b.env", Line: 2, Commit: "c6c6c6c6c6c6c6c6c6c6c6c6c6c6c6c6c6c6c6c6",
			SecretHash: hash2, Preview: "ghp_…(40)", Ignored: ".gitleaksignore", State: "false_positive"},
		{Repository: "github.com/acme/api", RuleID: "retired-rule", Path: "x", Line: 1, Commit: "c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7", SecretHash: hash1, Preview: "ab…"},
	}
}

func write(t *testing.T, format string, os []Occurrence) []byte {
	t.Helper()
	var b bytes.Buffer
	w, ok, err := New(format, &b, Tool{Name: "gitfleet", Version: "test", InformationURI: "https://example.com/gitfleet"}, rules)
	if !ok || err != nil {
		t.Fatalf("New(%s): %t %v", format, ok, err)
	}
	for _, o := range os {
		if err := w.Write(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/sarif-2.1.0-rtm.5.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("sarif.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("sarif.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSARIFIsValidAndOneResultPerOccurrence(t *testing.T) {
	schema := sarifSchema(t)
	for _, tt := range []struct {
		name string
		in   []Occurrence
	}{{"every kind", occurrences()}, {"none", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			out := write(t, "sarif", tt.in)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			if err := schema.Validate(doc); err != nil {
				t.Fatalf("not SARIF 2.1.0: %v\n%s", err, out)
			}
			// The schema does reject what is not SARIF: a result at a level
			// SARIF has not.
			if bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(strings.Replace(string(out), `"level":"error"`, `"level":"fatal"`, 1))); len(tt.in) > 0 && schema.Validate(bad) == nil {
				t.Fatal("the schema accepts a level SARIF has not")
			}
			var log struct {
				Version string
				Runs    []struct {
					Tool struct {
						Driver struct {
							Name  string
							Rules []struct{ ID string }
						}
					}
					Results []struct {
						RuleID              string
						RuleIndex           *int
						PartialFingerprints map[string]string
						Locations           []struct {
							PhysicalLocation struct {
								ArtifactLocation struct{ URI string }
								Region           *struct{ StartLine int }
							}
						}
						Properties struct {
							ArchiveEntry string
							ArchiveLine  int
						}
						Suppressions []struct{ Kind, Status, Justification string }
					}
				}
			}
			if err := json.Unmarshal(out, &log); err != nil {
				t.Fatal(err)
			}
			if log.Version != "2.1.0" || len(log.Runs) != 1 || len(log.Runs[0].Tool.Driver.Rules) != len(rules) {
				t.Fatalf("one run with the rules as tool.driver.rules:\n%s", out)
			}
			res := log.Runs[0].Results
			if len(res) != len(tt.in) {
				t.Fatalf("%d results for %d occurrences", len(res), len(tt.in))
			}
			for i, o := range tt.in {
				r := res[i]
				if r.RuleID != o.RuleID || r.PartialFingerprints[FingerprintKey] != o.SecretFingerprint() {
					t.Errorf("result %d: %+v", i, r)
				}
				if want, ok := rulesByID(rules)[o.RuleID]; ok != (r.RuleIndex != nil) || ok && *r.RuleIndex != want {
					t.Errorf("result %d: ruleIndex %v", i, r.RuleIndex)
				}
				loc := r.Locations[0].PhysicalLocation
				if inFile := o.Line > 0 && o.Archive == ""; inFile != (loc.Region != nil) || loc.Region != nil && loc.Region.StartLine != o.Line {
					t.Errorf("result %d: region %+v", i, loc.Region)
				}
				if p := r.Properties; p.ArchiveEntry != o.Archive || (o.Archive != "" && p.ArchiveLine != o.Line) {
					t.Errorf("result %d: archive entry %q line %d, want %q line %d", i, p.ArchiveEntry, p.ArchiveLine, o.Archive, o.Line)
				}
				wantSup := 0
				if o.Ignored != "" {
					wantSup++
				}
				if o.Resolved() && !o.SeenAgain { // seen again: open until resolved again
					wantSup++
				}
				if len(r.Suppressions) != wantSup {
					t.Errorf("result %d: suppressions %+v", i, r.Suppressions)
				}
			}
			if len(tt.in) > 0 {
				if res[0].PartialFingerprints[FingerprintKey] != res[1].PartialFingerprints[FingerprintKey] ||
					res[0].PartialFingerprints[FingerprintKey] == res[2].PartialFingerprints[FingerprintKey] {
					t.Error("one fingerprint per secret")
				}
				if u := res[3].Locations[0].PhysicalLocation.ArtifactLocation.URI; u != "keys/my%20cert:1.p12" {
					t.Errorf("uri %q", u)
				}
				// A secret in an archive is at the archive, a file of the
				// repository (issue 31: an entry's "../" led outside).
				if u := res[2].Locations[0].PhysicalLocation.ArtifactLocation.URI; u != "dist/app.jar" {
					t.Errorf("uri %q, want the archive dist/app.jar", u)
				}
			}
		})
	}
}

// A repository's log names it (versionControlProvenance: URI, commit,
// branch), holds its results only, and stops at code scanning's limit.
func TestRepositorySARIF(t *testing.T) {
	schema := sarifSchema(t)
	repo := Repository{Name: "github.com/acme/api", URI: "https://github.com/acme/api", Commit: strings.Repeat("c1", 20), Branch: "refs/heads/main"}
	var mine []Occurrence
	for _, o := range occurrences() {
		if o.Repository == repo.Name {
			mine = append(mine, o)
		}
	}
	var b bytes.Buffer
	if err := WriteRepositorySARIF(&b, Tool{Name: "gitfleet"}, rules, repo, mine); err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b.Bytes())
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("not SARIF 2.1.0: %v\n%s", err, b.Bytes())
	}
	var log struct {
		Runs []struct {
			VersionControlProvenance []struct{ RepositoryURI, RevisionID, Branch string }
			Results                  []json.RawMessage
		}
	}
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	if len(log.Runs) != 1 || len(log.Runs[0].Results) != len(mine) || len(log.Runs[0].VersionControlProvenance) != 1 {
		t.Fatalf("one run of %d results with its provenance:\n%s", len(mine), b.Bytes())
	}
	if p := log.Runs[0].VersionControlProvenance[0]; p.RepositoryURI != repo.URI || p.RevisionID != repo.Commit || p.Branch != repo.Branch {
		t.Errorf("provenance %+v, want %+v", p, repo)
	}

	for _, tt := range []struct {
		name string
		in   []Occurrence
		want string
	}{
		{"another repository's occurrence", occurrences()[3:4], "an occurrence of /srv/repos/tools"},
		{"past the limit", func() []Occurrence {
			o := make([]Occurrence, MaxResultsPerRun+1)
			for i := range o {
				o[i] = mine[0]
			}
			return o
		}(), "more than 25000 results"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteRepositorySARIF(io.Discard, Tool{Name: "gitfleet"}, rules, repo, tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
	// The streaming writer refuses the result past the limit as well.
	s, err := NewRepositorySARIF(io.Discard, Tool{Name: "gitfleet"}, rules, repo)
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxResultsPerRun + 1 {
		err = s.Write(mine[0])
		var le *LimitError
		if (i == MaxResultsPerRun) != errors.As(err, &le) {
			t.Fatalf("result %d: %v", i+1, err)
		}
	}
}

func TestGitleaksReportDecodesWithGitleaksTypes(t *testing.T) {
	in := occurrences()
	out := write(t, "gitleaks", in)
	var got []gitleaksreport.Finding
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("gitleaks cannot read it: %v\n%s", err, out)
	}
	if len(got) != len(in) {
		t.Fatalf("%d findings for %d occurrences", len(got), len(in))
	}
	for i, f := range got {
		o := in[i]
		want := gitleaksreport.Finding{RuleID: o.RuleID, StartLine: o.Line, EndLine: o.Line, File: o.File(), Commit: o.Commit,
			Link: o.Link, Secret: Redacted, Match: Redacted,
			Fingerprint: o.Commit + ":" + o.File() + ":" + o.RuleID + ":" + itoa(o.Line)}
		if o.SecretHash == "" {
			want.Secret, want.Match = "", ""
		}
		if f.RuleID != want.RuleID || f.StartLine != want.StartLine || f.EndLine != want.EndLine || f.File != want.File ||
			f.Commit != want.Commit || f.Link != want.Link || f.Secret != want.Secret || f.Match != want.Match || f.Fingerprint != want.Fingerprint {
			t.Errorf("finding %d:\n got %+v\nwant %+v", i, f, want)
		}
	}
	if got[0].Description != rules[0].Description || len(got[0].Tags) != 1 || got[0].Tags[0] != "github" {
		t.Errorf("description and tags from the rule: %+v", got[0])
	}
	// With what gitleaks compares in a baseline read from the repository.
	o := in[0]
	o.Gitleaks = &GitleaksDetail{EndLine: 3, StartColumn: 14, EndColumn: 53, Entropy: 4.25, Author: "Ann", Email: "ann@example.com",
		Date: "2026-01-02T01:04:05Z", Message: "settings\n\nbody"}
	var one []gitleaksreport.Finding
	if err := json.Unmarshal(write(t, "gitleaks", []Occurrence{o}), &one); err != nil || len(one) != 1 {
		t.Fatalf("%v %+v", err, one)
	}
	if f := one[0]; f.EndLine != 3 || f.StartColumn != 14 || f.EndColumn != 53 || f.Entropy != 4.25 || f.Author != "Ann" ||
		f.Email != "ann@example.com" || f.Date != "2026-01-02T01:04:05Z" || f.Message != "settings\n\nbody" || f.Secret != Redacted {
		t.Errorf("the detail is not written: %+v", f)
	}
	if out := write(t, "gitleaks", nil); strings.TrimSpace(string(out)) != "[]" {
		t.Errorf("no findings: %s", out)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestCSVHasAHeaderAndARowPerOccurrence(t *testing.T) {
	in := occurrences()
	rows, err := csv.NewReader(bytes.NewReader(write(t, "csv", in))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(in)+1 || strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Fatalf("rows: %q", rows)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for i, o := range in {
		r := rows[i+1]
		if r[col["RuleID"]] != o.RuleID || r[col["SecretHash"]] != o.SecretHash || r[col["Ignored"]] != string(o.Ignored) || r[col["State"]] != o.State {
			t.Errorf("row %d: %q", i, r)
		}
	}
	if f := rows[5][col["File"]]; f != "'=cmd|' /C calc'!A0" {
		t.Errorf("a formula-like file name is written as text: %q", f)
	}
}

// Each writer keeps nothing per occurrence: writing 200,000 takes no more
// memory than writing one.
func TestWritersStream(t *testing.T) {
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			w, _, err := New(format, io.Discard, Tool{Name: "gitfleet"}, rules)
			if err != nil {
				t.Fatal(err)
			}
			o := occurrences()[0]
			heap := func() uint64 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			if err := w.Write(o); err != nil {
				t.Fatal(err)
			}
			n := 200_000
			if format == "sarif" { // a run holds no more
				n = MaxResultsPerRun - 1
			}
			before := heap()
			for range n {
				if err := w.Write(o); err != nil {
					t.Fatal(err)
				}
			}
			after := heap()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if after > before+1<<20 {
				t.Errorf("heap grew from %d to %d bytes over %d rows", before, after, n)
			}
		})
	}
}

func TestNoSecretInAnyFormat(t *testing.T) {
	// The writers are never given a secret; what they make of a preview
	// and a hash must not look like one either (a preview stays a preview).
	for _, format := range Formats {
		out := string(write(t, format, occurrences()))
		if strings.Contains(out, "ghp_0") || !strings.Contains(out, hash1) && format != "gitleaks" {
			t.Errorf("%s: %s", format, out)
		}
	}
}

// A repository names its own files: no name reaches a report as bytes a
// terminal acts on (C0, C1, bidirectional overrides) or as a formula a
// spreadsheet runs in a locale whose separator is ";". The JSON formats
// escape them (\u…), so the name decodes as it is.
func TestHostileNamesInReports(t *testing.T) {
	names := []string{"x;=1+1;y.env", "evil\u202etxt.env", "c1\u009bcontrol.env", "esc\x1b[2Jclear.env"}
	var in []Occurrence
	for i, n := range names {
		in = append(in, Occurrence{Repository: "github.com/acme/api", RuleID: "github-pat", Path: n, Line: i + 1,
			Commit: strings.Repeat("c", 40), SecretHash: hash1, Preview: "ghp_…(40)"})
	}
	for _, format := range Formats {
		out := write(t, format, in)
		for _, bad := range []string{"\u202e", "\u009b", "\x1b"} {
			if bytes.Contains(out, []byte(bad)) {
				t.Errorf("%s: %q written raw", format, bad)
			}
		}
		if format == "gitleaks" || format == "sarif" {
			for _, n := range names[1:3] {
				if !bytes.Contains(out, []byte(strings.Trim(strconv.QuoteToASCII(n), `"`))) {
					t.Errorf("%s: %q not escaped as JSON", format, n)
				}
			}
		}
	}
	// Every cell is quoted: split at ";" as such a locale would, outside
	// quotes, no cell starts a formula.
	for _, line := range strings.Split(string(write(t, "csv", in)), "\r\n") {
		inQuote := false
		for i, c := range line {
			switch {
			case c == '"':
				inQuote = !inQuote
			case c == ';' && !inQuote && i+1 < len(line) && strings.ContainsRune("=+-@", rune(line[i+1])):
				t.Errorf("csv: a formula after an unquoted ';': %q", line)
			}
		}
	}
}

// What code scanning shows of a rule and ranks alerts by: each rule has a
// security-severity from its family, a full description and help (text
// and Markdown), the driver its version and informationUri; a result's
// severity and level follow the validity check and triage.
func TestSARIFRulesAndSeverity(t *testing.T) {
	rs := append([]Rule{}, rules...)
	rs = append(rs, Rule{ID: "generic-api-key", Description: "Detected a Generic API Key"}, Rule{ID: "acme-token"})
	base := Occurrence{Repository: "github.com/acme/api", RuleID: "github-pat", Path: "a.env", Line: 1, Commit: strings.Repeat("c", 40),
		SecretHash: hash1, Preview: "ghp_…(40)"}
	with := func(f func(*Occurrence)) Occurrence { o := base; f(&o); return o }
	cases := []struct {
		name     string
		o        Occurrence
		severity string
		level    string
	}{
		{"unchecked: its rule's", base, "8.0", "error"},
		{"valid: critical", with(func(o *Occurrence) { o.Validity = "valid" }), "9.5", "error"},
		{"valid test-mode key: low", with(func(o *Occurrence) { o.Validity, o.TestKey = "valid", true }), "2.0", "note"},
		{"refused by its provider: low", with(func(o *Occurrence) { o.Validity = "invalid" }), "2.0", "note"},
		{"unknown: its rule's", with(func(o *Occurrence) { o.Validity = "unknown" }), "8.0", "error"},
		{"used in tests: low", with(func(o *Occurrence) { o.State = "used_in_tests" }), "2.0", "note"},
		{"generic rule", with(func(o *Occurrence) { o.RuleID = "generic-api-key" }), "5.0", "error"},
	}
	var in []Occurrence
	for _, c := range cases {
		in = append(in, c.o)
	}
	var b bytes.Buffer
	tool := Tool{Name: "gitfleet", Version: "1.2.3", InformationURI: "https://example.com/gitfleet"}
	if err := WriteRepositorySARIF(&b, tool, rs, Repository{Name: base.Repository, URI: "https://github.com/acme/api"}, in); err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := sarifSchema(t).Validate(doc); err != nil {
		t.Fatalf("not SARIF 2.1.0: %v\n%s", err, b.Bytes())
	}
	type message struct{ Text, Markdown string }
	var log struct {
		Runs []struct {
			Tool struct {
				Driver struct {
					Name, Version, InformationURI string
					Rules                         []struct {
						ID                                string
						ShortDescription, FullDescription *message
						Help                              *message
						Properties                        map[string]any
					}
				}
			}
			Results []struct {
				Level      string
				Properties map[string]any
			}
		}
	}
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	d := log.Runs[0].Tool.Driver
	if d.Version != "1.2.3" || d.InformationURI != "https://example.com/gitfleet" {
		t.Errorf("driver %q %q", d.Version, d.InformationURI)
	}
	wantRule := map[string]string{"github-pat": "8.0", "pkcs12-file": "7.0", "generic-api-key": "5.0", "acme-token": "7.0"}
	for _, r := range d.Rules {
		if r.Properties["security-severity"] != wantRule[r.ID] {
			t.Errorf("rule %s: security-severity %v, want %s", r.ID, r.Properties["security-severity"], wantRule[r.ID])
		}
		if r.Help == nil || r.Help.Text == "" || !strings.Contains(r.Help.Markdown, "starter findings resolve") {
			t.Errorf("rule %s: help %+v", r.ID, r.Help)
		}
		if r.ID != "acme-token" && (r.FullDescription == nil || r.FullDescription.Text == "") {
			t.Errorf("rule %s: no full description", r.ID)
		}
	}
	for i, c := range cases {
		r := log.Runs[0].Results[i]
		if r.Properties["security-severity"] != c.severity || r.Level != c.level {
			t.Errorf("%s: severity %v level %s, want %s %s", c.name, r.Properties["security-severity"], r.Level, c.severity, c.level)
		}
	}
}
