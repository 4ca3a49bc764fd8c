package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/scan"
)

// The rules commands work offline: they read rule files and never connect
// to Temporal or the database, so a configuration can be checked before a
// worker is pointed at it.

func (a *app) rulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check and list secret-scanning rules (offline)",
		Long: `rules reads gitleaks-format rule files (gitleaks ` + scan.GitleaksVersion + `'s format, loaded unmodified)
the way the worker does. It connects to nothing.`,
	}
	cmd.AddCommand(a.rulesCheckCmd(), a.rulesListCmd())
	return cmd
}

func (a *app) rulesCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a rule file; exit code 2 when it is invalid",
		Long: `check loads FILE as the worker would (with what it extends) and prints a
summary, or the first problem. Settings that load but have no effect, as in
gitleaks, are printed as warnings.`,
		Example: `  starter rules check gitleaks.toml`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, in []string) error {
			return a.rulesCheck(in[0])
		},
	}
}

func (a *app) rulesListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list [FILE]",
		Short: "List the effective rules of FILE, or of the configured rule set",
		Long: `list prints every rule after [extend] is applied: id, keywords, path, tags,
and whether it is composite or skipReport; on standard error, where the rules
come from. Without FILE it lists the rules the worker uses: the file named by
GITFLEET_RULES, else the built-in rules — gitleaks' default configuration,
from the gitleaks release gitfleet is built with, plus gitfleet's extension.
A file with [extend] useDefault = true extends gitleaks' default
configuration, as in gitleaks.`,
		Example: `  starter rules list
  starter rules list my-rules.toml --json`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(_ *cobra.Command, in []string) error {
			file := ""
			if len(in) == 1 {
				file = in[0]
			}
			return a.rulesList(file)
		},
	}
}

// rulesCheck validates file and prints a one-line summary.
func (a *app) rulesCheck(file string) error {
	rs, err := a.loadRules(file)
	if err != nil {
		return err
	}
	a.printRuleWarnings(rs)
	if a.json {
		return a.printJSON(struct {
			File       string   `json:"file"`
			Source     string   `json:"source"`
			Title      string   `json:"title"`
			MinVersion string   `json:"minVersion,omitempty"`
			Rules      int      `json:"rules"`
			Allowlists int      `json:"globalAllowlists"`
			Hash       string   `json:"hash"`
			Warnings   []string `json:"warnings"`
		}{file, rs.Source(), rs.Title(), rs.MinVersion(), rs.Len(), len(rs.Allowlists()), rs.Hash(), nonNilStrings(rs.Warnings())})
	}
	fmt.Fprintf(a.stdout, "%s: %s, %s — OK\n", rs.Source(), count(int64(rs.Len()), "rule", "rules"), count(int64(len(rs.Allowlists())), "global allowlist", "global allowlists"))
	return nil
}

// rulesList prints the rules of file, or of the configured set.
func (a *app) rulesList(file string) error {
	rs, err := a.loadRules(file)
	if err != nil {
		return err
	}
	a.printRuleWarnings(rs)
	fmt.Fprintln(a.stderr, "source:", rs.Source())
	rules := rs.Rules()
	if a.json {
		out := make([]ruleJSON, len(rules))
		for i, r := range rules {
			out[i] = newRuleJSON(r)
		}
		return a.printJSON(out)
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tKEYWORDS\tPATH\tTAGS\tNOTES")
	for _, r := range rules {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.ID, orDash(strings.Join(r.Keywords, ",")), orDash(r.Path), orDash(strings.Join(r.Tags, ",")), orDash(ruleNotes(r)))
	}
	return w.Flush()
}

// loadRules loads file; without one, the set the worker uses: the file
// named by GITFLEET_RULES, else the built-in rules (as
// activities.NewScanner decides). A file that does not load is a usage
// error.
func (a *app) loadRules(file string) (*scan.RuleSet, error) {
	if file == "" {
		file = a.cfg.RulesFile
	}
	if file == "" {
		return scan.Default()
	}
	rs, err := scan.LoadFile(file)
	if err != nil {
		return nil, usageError{err}
	}
	return rs, nil
}

func (a *app) printRuleWarnings(rs *scan.RuleSet) {
	for _, w := range rs.Warnings() {
		fmt.Fprintln(a.stderr, "warning:", w)
	}
}

// ruleNotes says how a rule differs from a plain one.
func ruleNotes(r scan.Rule) string {
	var notes []string
	if r.SkipReport {
		notes = append(notes, "skipReport")
	}
	for _, q := range r.Required {
		notes = append(notes, "requires "+q.ID+within(q))
	}
	return strings.Join(notes, "; ")
}

func within(q scan.Required) string {
	var parts []string
	if q.WithinLines != nil {
		parts = append(parts, count(int64(*q.WithinLines), "line", "lines"))
	}
	if q.WithinColumns != nil {
		parts = append(parts, count(int64(*q.WithinColumns), "column", "columns"))
	}
	if len(parts) == 0 {
		return ""
	}
	return " within " + strings.Join(parts, " and ")
}

type ruleJSON struct {
	ID          string         `json:"id"`
	Description string         `json:"description,omitempty"`
	Keywords    []string       `json:"keywords"`
	Path        string         `json:"path,omitempty"`
	Tags        []string       `json:"tags"`
	SkipReport  bool           `json:"skipReport,omitempty"`
	Required    []requiredJSON `json:"required,omitempty"`
}

type requiredJSON struct {
	ID            string `json:"id"`
	WithinLines   *int   `json:"withinLines,omitempty"`
	WithinColumns *int   `json:"withinColumns,omitempty"`
}

func newRuleJSON(r scan.Rule) ruleJSON {
	j := ruleJSON{ID: r.ID, Description: r.Description, Keywords: nonNilStrings(r.Keywords), Path: r.Path, Tags: nonNilStrings(r.Tags), SkipReport: r.SkipReport}
	for _, q := range r.Required {
		j.Required = append(j.Required, requiredJSON{q.ID, q.WithinLines, q.WithinColumns})
	}
	return j
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nonNilStrings makes JSON print [] rather than null.
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
