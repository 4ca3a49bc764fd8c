package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	gitleaksreport "github.com/zricethezav/gitleaks/v8/report"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/report"
	"gitfleet/internal/infra/store"
)

// hashOf is a secret's hash as the tests' workers make it.
func hashOf(secret string) string {
	mac := hmac.New(sha256.New, testenv.FindingKey.Secret)
	mac.Write([]byte(secret))
	return hex.EncodeToString(mac.Sum(nil))
}

// samePrefix are two fake tokens whose hashes start with the same 4 hex
// digits.
func samePrefix() (string, string) {
	seen := map[string]string{}
	for i := 0; ; i++ {
		tok := gittest.FakePAT(fmt.Sprintf("Pf%d", i))
		if other, ok := seen[hashOf(tok)[:4]]; ok {
			return other, tok
		}
		seen[hashOf(tok)[:4]] = tok
	}
}

// A secret's triage state is the codebase's: it holds through a rename
// and a new scan, a re-commit of the secret is "seen again after
// resolution", every change is in its history; prefixes that name
// several secrets are refused with the candidates.
func TestTriageThroughARenameAndARecommit(t *testing.T) {
	o, _ := newRepo(t)
	a, b := samePrefix()
	c := gittest.FakePAT("Tr3")
	if _, err := fg.Commit(o, "app", "main", map[string]string{"a.env": "T=" + a + "\n", "b.env": "T=" + b + "\n", "c.env": "T=" + c + "\n"}, "keys"); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := starter(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		for _, s := range []string{a, b, c} {
			if strings.Contains(out+errOut, s) {
				t.Fatalf("%v prints a secret:\n%s%s", args, out, errOut)
			}
		}
		return out
	}
	lineWith := func(out, s string) string {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, s) {
				return l
			}
		}
		t.Fatalf("no line with %q:\n%s", s, out)
		return ""
	}
	run("collect", o+"/app")
	ha, hb := hashOf(a), hashOf(b)

	for _, bad := range []struct {
		args []string
		want []string
	}{
		{[]string{"findings", "resolve", o + "/app", ha[:4], "--reason", "revoked"}, []string{"2 secrets have a hash starting with " + ha[:4], "  " + ha[:16] + "  github-pat  a.env:1", "  " + hb[:16] + "  github-pat  b.env:1"}},
		{[]string{"findings", "resolve", o + "/app", "zz12", "--reason", "revoked"}, []string{"not the start of a secret hash"}},
		{[]string{"findings", "resolve", o + "/app", ha[:4]}, []string{"--reason"}},
		{[]string{"findings", "resolve", o + "/app", "0000000000", "--reason", "revoked"}, []string{"no secret whose hash starts with"}},
		{[]string{"findings", "reopen", o + "/app", ha[:12]}, []string{"open already"}},
		{[]string{"findings", "--state", "fixed"}, []string{"--state"}},
		{[]string{"findings", "--format", "pdf"}, []string{"--format"}},
		{[]string{"findings", o + "/app", "--all-repos"}, []string{"--all-repos"}},
	} {
		out, errOut, code := starter(t, bad.args...)
		for _, w := range bad.want {
			if code != exitUsage || !strings.Contains(errOut, w) {
				t.Errorf("%v: exit %d, want %d and %q\n%s%s", bad.args, code, exitUsage, w, out, errOut)
			}
		}
	}

	out := run("findings", "resolve", o+"/app", ha[:12], "--reason", "revoked", "--comment", "rotated", "--as", "ann")
	if !strings.Contains(out, "github-pat "+ha[:12]+" resolved as revoked by ann") {
		t.Fatalf("resolve:\n%s", out)
	}

	if err := fg.Rename(o, "app", "renamed"); err != nil {
		t.Fatal(err)
	}
	run("collect", o+"/renamed")
	if l := lineWith(run("findings", o+"/renamed"), "a.env:1"); !strings.Contains(l, "revoked") || strings.Contains(l, "seen again") {
		t.Fatalf("after the rename: %s", l)
	}
	glob := fg.Host() + "/" + o + "/*"
	if out := run("findings", "--repo", glob, "--state", "revoked"); strings.Count(out, "github-pat") != 1 || !strings.Contains(out, fg.Host()+"/"+o+"/renamed") {
		t.Fatalf("the fleet's revoked secrets:\n%s", out)
	}

	// The revoked secret is committed again, elsewhere.
	if _, err := fg.Commit(o, "renamed", "main", map[string]string{"new/a.env": "X=" + a + "\n"}, "again"); err != nil {
		t.Fatal(err)
	}
	run("collect", o+"/renamed")
	if l := lineWith(run("findings", o+"/renamed"), "a.env:1"); !strings.Contains(l, "revoked (seen again after resolution)") {
		t.Fatalf("after a re-commit: %s", l)
	}
	sum := run("findings", "--summary", "--repo", glob)
	for _, want := range []string{"3 secrets across 1 repository", "  open", "  revoked", "  seen again after resolution", "  github"} {
		if !strings.Contains(sum, want) {
			t.Fatalf("summary lacks %q:\n%s", want, sum)
		}
	}
	if l := lineWith(sum, "seen again"); !strings.HasSuffix(l, " 1") {
		t.Fatalf("summary: %s", l)
	}

	run("findings", "reopen", o+"/renamed", ha[:12], "--as", "bob", "--comment", "not rotated after all")
	show := run("findings", "show", o+"/renamed", ha[:12])
	for _, want := range []string{"state        open", "occurrences  2", "revoked  ann  rotated", "open     bob  not rotated after all"} {
		if !strings.Contains(show, want) {
			t.Fatalf("show lacks %q:\n%s", want, show)
		}
	}

	// Reports of the fleet's view: one entry per occurrence, no secret.
	sarif := run("findings", "--repo", glob, "--format", "sarif")
	var log struct {
		Runs []struct {
			Results []struct {
				RuleID              string
				PartialFingerprints map[string]string
			}
		}
	}
	if err := json.Unmarshal([]byte(sarif), &log); err != nil || len(log.Runs) != 1 || len(log.Runs[0].Results) != 4 {
		t.Fatalf("sarif: %v\n%s", err, sarif)
	}
	validSARIF(t, sarif)
	fps := map[string]int{}
	for _, r := range log.Runs[0].Results {
		fps[r.PartialFingerprints[report.FingerprintKey]]++
	}
	if len(fps) != 3 {
		t.Fatalf("sarif: one fingerprint per secret: %v", fps)
	}
	var gl []gitleaksreport.Finding
	if err := json.Unmarshal([]byte(run("findings", o+"/renamed", "--format", "gitleaks")), &gl); err != nil || len(gl) != 4 ||
		gl[0].Secret != report.Redacted || !strings.HasPrefix(gl[0].Link, "https://"+fg.Host()+"/"+o+"/renamed/blob/") {
		t.Fatalf("gitleaks: %v %+v", err, gl)
	}
	rows, err := csv.NewReader(bytes.NewReader([]byte(run("findings", "--repo", glob, "--format", "csv", "--rule", "github-pat")))).ReadAll()
	if err != nil || len(rows) != 5 || rows[0][0] != "Repository" {
		t.Fatalf("csv: %v %q", err, rows)
	}
}

// validSARIF validates a report against the SARIF 2.1.0 schema vendored
// beside package report's tests, formats (uri, uri-reference, date-time)
// asserted; the same schema must refuse the log made invalid (a result at
// a level SARIF has not), so a schema that accepts anything fails here.
func validSARIF(t *testing.T, doc string) {
	t.Helper()
	f, err := os.Open("../internal/domain/report/testdata/sarif-2.1.0-rtm.5.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	schemaDoc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("sarif.json", schemaDoc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("sarif.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(v); err != nil {
		t.Fatalf("not SARIF 2.1.0: %v", err)
	}
	bad, err := jsonschema.UnmarshalJSON(strings.NewReader(strings.Replace(doc, `"version": "2.1.0"`, `"version": "2.1.1"`, 1)))
	if err != nil || schema.Validate(bad) == nil {
		t.Fatalf("the schema accepts a log of SARIF 2.1.1 (%v)", err)
	}
}

// --as cannot sign a change as gitfleet's own validity checks, in any case
// or spacing; ordinary names pass.
func TestActorRefusesTheSystemsName(t *testing.T) {
	for _, tc := range []struct {
		as string
		ok bool
	}{
		{"ann", true},
		{"gitfleet", true}, // a deploy user may be called that
		{"gitfleet-bot", true},
		{store.ValidityActor, false},
		{"GitFleet (validity check)", false},
		{"gitfleet  ( anything )", false},
		{"line\nbreak", false},
	} {
		_, err := actor(tc.as)
		if (err == nil) != tc.ok {
			t.Errorf("actor(%q) = %v, want ok %v", tc.as, err, tc.ok)
		}
	}
}
