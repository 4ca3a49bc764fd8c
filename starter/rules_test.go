package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/config"
)

// The rules commands need no stack: these tests give them an environment
// whose Temporal and database addresses lead nowhere, so that a command that
// tried to connect would fail.

// rulesCLI runs the command line in-process with env as its environment.
func rulesCLI(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	unreachable := map[string]string{
		config.EnvTemporalAddress: "127.0.0.1:1",
		config.EnvDatabaseURL:     "postgres://nobody@127.0.0.1:1/none?connect_timeout=1",
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return unreachable[k]
	}
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut, getenv)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		errOut.WriteString("starter: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), exitCode(err)
}

func writeRules(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const cliRules = `
title = "cli test"
minVersion = "v8.28.0"
[[rules]]
id = "pass"
regex = '''pass_([a-z0-9]{8})'''
keywords = ["pass_"]
tags = ["demo", "composite"]
[[rules.required]]
id = "user"
withinLines = 2
[[rules]]
id = "user"
regex = '''user_[a-z0-9]{6}'''
keywords = ["user_"]
skipReport = true
[[rules]]
id = "envfile"
path = '''\.env$'''
[[allowlists]]
paths = ['''^vendor/''']
`

func TestRulesCheck(t *testing.T) {
	good := writeRules(t, "good.toml", cliRules)
	stdout, stderr, code := rulesCLI(t, nil, "rules", "check", good)
	if code != 0 || stdout != good+": 3 rules, 1 global allowlist — OK\n" || stderr != "" {
		t.Errorf("valid file: code %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}

	bad := writeRules(t, "bad.toml", "[[rules]]\nid = 'a'\nregex = 'a'\n\nskipReprot = true\n")
	stdout, stderr, code = rulesCLI(t, nil, "rules", "check", bad)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, `rules["a"].skipReprot (line 5)`) {
		t.Errorf("unknown key: code %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}

	if _, stderr, code = rulesCLI(t, nil, "rules", "check", filepath.Join(t.TempDir(), "missing.toml")); code != exitUsage {
		t.Errorf("missing file: code %d, stderr %q", code, stderr)
	}
	if _, _, code = rulesCLI(t, nil, "rules", "check"); code != exitUsage {
		t.Errorf("no file: code %d", code)
	}

	// A file extending the default set says what it extends.
	ext := writeRules(t, "ext.toml", "[extend]\nuseDefault = true\n[[rules]]\nid = 'own'\nregex = 'own_[0-9]{8}'\nkeywords = ['own_']\n")
	stdout, _, code = rulesCLI(t, nil, "rules", "check", ext)
	if want := ext + ", extending gitleaks " + scan.GitleaksVersion + " default configuration (222 rules): 223 rules, 1 global allowlist — OK\n"; code != 0 || stdout != want {
		t.Errorf("extending file: code %d\nstdout %q\nwant   %q", code, stdout, want)
	}

	// Settings without effect load, with a warning.
	warn := writeRules(t, "warn.toml", "[extend]\ndisabledRules = ['x']\n[[rules]]\nid = 'a'\nregex = 'a'\n")
	stdout, stderr, code = rulesCLI(t, nil, "rules", "check", warn)
	if code != 0 || !strings.HasSuffix(stdout, "— OK\n") || !strings.Contains(stderr, "warning: [extend] disabledRules has no effect") {
		t.Errorf("warnings: code %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}

	stdout, _, code = rulesCLI(t, nil, "rules", "check", "--json", good)
	var res struct {
		Rules      int    `json:"rules"`
		Allowlists int    `json:"globalAllowlists"`
		MinVersion string `json:"minVersion"`
		Hash       string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 || res.Rules != 3 || res.Allowlists != 1 || res.MinVersion != "v8.28.0" || len(res.Hash) != 64 {
		t.Errorf("--json: code %d, %+v, %v\n%s", code, res, err, stdout)
	}
}

func TestRulesList(t *testing.T) {
	file := writeRules(t, "rules.toml", cliRules)
	want := []string{
		"ID       KEYWORDS  PATH    TAGS            NOTES",
		"envfile  -         \\.env$  -               -",
		"pass     pass_     -       demo,composite  requires user within 2 lines",
		"user     user_     -       -               skipReport",
	}
	stdout, stderr, code := rulesCLI(t, nil, "rules", "list", file)
	if code != 0 || stdout != strings.Join(want, "\n")+"\n" {
		t.Errorf("list FILE: code %d, stderr %q\n%s", code, stderr, stdout)
	}

	// Without FILE: the set the worker uses.
	stdout, _, code = rulesCLI(t, map[string]string{config.EnvRules: file}, "rules", "list")
	if code != 0 || !strings.HasPrefix(stdout, want[0]) || strings.Count(stdout, "\n") != len(want) {
		t.Errorf("list with %s: code %d\n%s", config.EnvRules, code, stdout)
	}
	stdout, stderr, code = rulesCLI(t, nil, "rules", "list")
	if code != 0 || !strings.Contains(stdout, "\naws-access-token ") ||
		!strings.Contains(stderr, "source: built-in: gitleaks "+scan.GitleaksVersion+" default configuration (222 rules) + gitfleet extension") {
		t.Errorf("list of the built-in rules: code %d\nstderr %q\n%s", code, stderr, stdout)
	}
	if _, stderr, code = rulesCLI(t, map[string]string{config.EnvRules: filepath.Join(t.TempDir(), "none.toml")}, "rules", "list"); code != exitUsage {
		t.Errorf("list with a missing %s: code %d, stderr %q", config.EnvRules, code, stderr)
	}

	stdout, _, code = rulesCLI(t, nil, "rules", "list", "--json", file)
	var rules []struct {
		ID         string   `json:"id"`
		Keywords   []string `json:"keywords"`
		SkipReport bool     `json:"skipReport"`
		Required   []struct {
			ID          string `json:"id"`
			WithinLines *int   `json:"withinLines"`
		} `json:"required"`
	}
	if err := json.Unmarshal([]byte(stdout), &rules); err != nil || code != 0 || len(rules) != 3 ||
		rules[1].ID != "pass" || len(rules[1].Required) != 1 || *rules[1].Required[0].WithinLines != 2 || !rules[2].SkipReport {
		t.Errorf("--json: code %d, %v\n%s", code, err, stdout)
	}
}
