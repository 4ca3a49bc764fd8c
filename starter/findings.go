package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/report"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/store"
)

// fleetFlags select secrets across the fleet, or within one target.
type fleetFlags struct {
	allRepos             bool
	repo                 string
	rules, tags, states  []string
	status, since        string
	decoded, notDecoded  bool
	seenAgain            bool
	ignored, ignoredOnly bool
	valid                bool
	validity             []string
	summary              bool
	top                  int
	format, out          string
	after                int64
}

func (f *fleetFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.allRepos, "all-repos", false, "every collected repository and scan target (the same as giving no target)")
	fl.StringVar(&f.repo, "repo", "", "repositories whose host/owner/name (a scan target's location) matches this glob (* and ?), case-insensitive")
	fl.StringSliceVar(&f.rules, "rule", nil, "only secrets of these rules (repeat or comma-separate)")
	fl.StringSliceVar(&f.tags, "tag", nil, "only secrets of rules with these tags (see 'starter rules list')")
	fl.StringSliceVar(&f.states, "state", nil, "only secrets in these states: open, resolved, or a reason ("+strings.Join(store.Reasons, ", ")+")")
	fl.StringVar(&f.status, "status", "", "only secrets present, removed or unknown at the scanned tips")
	fl.StringVar(&f.since, "since", "", "only secrets first seen since this date (2006-01-02 or RFC 3339)")
	fl.BoolVar(&f.decoded, "decoded", false, "only secrets found in decoded text (base64, hex, percent-encoding)")
	fl.BoolVar(&f.notDecoded, "not-decoded", false, "only secrets found as written")
	fl.BoolVar(&f.seenAgain, "seen-again", false, "only resolved secrets seen again in a new commit since")
	fl.BoolVar(&f.ignored, "ignored", false, "also the secrets the repository's .gitleaksignore or gitleaks:allow suppress")
	fl.BoolVar(&f.ignoredOnly, "ignored-only", false, "only the secrets the repository's suppressions apply to")
	fl.BoolVar(&f.valid, "valid", false, "only secrets their provider accepted at the last check (the same as --validity valid)")
	fl.StringSliceVar(&f.validity, "validity", nil, "only secrets whose last check found: "+strings.Join(store.ValidityFilters, ", "))
	fl.BoolVar(&f.summary, "summary", false, "count the secrets by state, rule family and repository instead of listing them")
	fl.IntVar(&f.top, "top", 10, "with --summary: how many rule families and repositories to name")
	fl.StringVar(&f.format, "format", "", "write every occurrence as a report: "+strings.Join(report.Formats, ", "))
	fl.StringVar(&f.out, "out", "", "with --format: write one file per repository into this directory (sarif: needed when the selection holds several)")
	fl.Int64Var(&f.after, "after", 0, "list the secrets after this cursor (the one a listing that stopped printed)")
}

// fleetNames are the flags that make findings read the fleet's secrets
// (of one target when one is given) rather than one repository's list.
var fleetNames = []string{"all-repos", "repo", "rule", "tag", "state", "status", "since", "decoded", "not-decoded", "seen-again",
	"ignored", "ignored-only", "summary", "format", "out", "after", "valid", "validity"}

func (f *fleetFlags) used(cmd *cobra.Command) bool {
	for _, n := range fleetNames {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// filter is the store's filter for the flags; rules resolve --tag.
func (f *fleetFlags) filter(rules func() (*scan.RuleSet, error)) (store.FleetFilter, error) {
	out := store.FleetFilter{Repo: f.repo, SeenAgain: f.seenAgain, Ignored: f.ignored, IgnoredOnly: f.ignoredOnly}
	bad := func(format string, v ...any) (store.FleetFilter, error) {
		return store.FleetFilter{}, usageError{fmt.Errorf(format, v...)}
	}
	if strings.ContainsFunc(f.repo, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return bad("--repo: control characters")
	}
	if f.rules != nil {
		out.Rules = append([]string{}, f.rules...)
	}
	if len(f.tags) > 0 {
		rs, err := rules()
		if err != nil {
			return out, err
		}
		tagged := []string{}
		for _, r := range rs.Rules() {
			for _, t := range r.Tags {
				for _, want := range f.tags {
					if strings.EqualFold(t, want) {
						tagged = append(tagged, r.ID)
					}
				}
			}
		}
		if len(tagged) == 0 {
			return bad("--tag: no rule of %s has tag %s", rs.Source(), strings.Join(f.tags, " or "))
		}
		if out.Rules != nil { // both: the rules of the list that have the tag
			var both []string
			for _, r := range out.Rules {
				for _, t := range tagged {
					if r == t {
						both = append(both, r)
					}
				}
			}
			tagged = append([]string{}, both...)
		}
		out.Rules = tagged
	}
	for _, s := range f.states {
		if s != store.StateOpen && s != "resolved" && !isReason(s) {
			return bad("--state %q: one of open, resolved, %s", s, strings.Join(store.Reasons, ", "))
		}
		out.States = append(out.States, s)
	}
	switch p := store.PresenceStatus(f.status); p {
	case "", store.Present, store.Removed, store.Unknown:
		out.Presence = p
	default:
		return bad("--status %q: one of present, removed, unknown", f.status)
	}
	if f.since != "" {
		t, err := time.Parse("2006-01-02", f.since)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, f.since); err != nil {
				return bad("--since %q: a date (2006-01-02) or a time (RFC 3339)", f.since)
			}
		}
		out.Since = t
	}
	switch {
	case f.decoded && f.notDecoded:
		return bad("--decoded and --not-decoded do not go together")
	case f.decoded, f.notDecoded:
		d := f.decoded
		out.Decoded = &d
	}
	v, err := validityFilter(f.valid, f.validity)
	if err != nil {
		return out, err
	}
	out.Validity = v
	if f.ignored && f.ignoredOnly {
		return bad("--ignored and --ignored-only do not go together")
	}
	if f.top < 1 {
		return bad("--top must be at least 1")
	}
	if f.format != "" {
		known := false
		for _, x := range report.Formats {
			known = known || x == f.format
		}
		if !known {
			return bad("--format %q: one of %s", f.format, strings.Join(report.Formats, ", "))
		}
		if f.summary {
			return bad("--format and --summary do not go together")
		}
	}
	if f.out != "" && f.format == "" {
		return bad("--out writes the files of a report: give --format")
	}
	return out, nil
}

func isReason(s string) bool {
	for _, r := range store.Reasons {
		if r == s {
			return true
		}
	}
	return false
}

func (a *app) findingsCmd() *cobra.Command {
	var sel selectionFlags
	var ff fleetFlags
	var limit int
	var all, occurrences bool
	cmd := &cobra.Command{
		Use:   "findings [host/owner/name | owner/name | url | path]",
		Short: "List, triage and export the secrets found in the fleet or in one repository",
		Long: `findings lists what the scans found under the current rule set, one line per
secret however many files, versions and commits hold it. A secret is a rule
and a keyed hash of what it matched (equal hashes are the same secret; the
secret itself is never stored); for a rule that matches file names only,
each matching path is a secret. Each line gives the rule, the file:line and
commit where the secret was first seen, its occurrences (every blob
version and offset holding it), whether it is still present, its triage
state, a short redacted preview and the start of its hash. A secret in a
file inside an archive (a jar, a zip, a tarball, a .gz) is at the archive's
path, "!" and the file's path in it, as gitleaks writes it:
dist/app.jar!config/app.env:3 (--json: "archive" is the path inside).

Without a target (or with --all-repos) it lists the secrets of every
collected repository and scan target, newest first, and the filters below
narrow it; with a target and a filter, that target's. A listing stops after
--limit secrets and prints the --after cursor that continues it.

First seen: in the order the scans met them. A scan walks the new commits
of each ref oldest first (by committer date) and the next scan continues
where it stopped, so this is the oldest commit of the first scan that met
the secret.

Status, as of the latest complete scan:
  present  a blob holding it is in the tree at the tip of a scanned ref
           (every branch and tag, or the selected refs and commits)
  removed  no scanned ref's tip holds it any more; the history still does,
           so the secret must still be revoked
  unknown  found by a scan that has not completed yet, or scanned before
           gitfleet recorded this; the next complete scan decides

State (triage, 'findings resolve' and 'findings reopen'): open, or resolved
as revoked, false_positive, used_in_tests or wont_fix. A resolved secret met
again in a commit since is marked "seen again".

Suppressions the repository keeps for gitleaks apply: a secret named by the
.gitleaksignore at the root of a scanned tip (commit:file:rule:line or
file:rule:line), or on a line with gitleaks:allow, is kept but not listed;
the listing counts them, --ignored lists them too.

--format writes every occurrence of the selected secrets as a report other
tools read: sarif (SARIF 2.1.0, as GitHub code scanning takes it), gitleaks
(gitleaks' JSON report, secrets redacted), csv. A SARIF log is of one
repository (code scanning attaches its results to that repository's files;
its run names the repository, branch and commit scanned): a selection of
several needs --out DIR, which writes one file per repository
(host_owner_name.sarif), as it does for the other formats. A repository
past code scanning's limits (25,000 results in a run; it shows the 5,000
most severe) is refused: narrow the selection (--state open, --status
present, --rule).

--occurrences lists every occurrence beneath its secret, with its own
status. At most --limit secrets are listed, and when there are more the
output says how many; --all lists every one.

A collected repository is named like for 'show' (this counts as a view); a
scan target is given as it was scanned, with the same --ref/--commit.`,
		Example: `  starter findings octocat/Hello-World
  starter findings ./my-repo --occurrences
  starter findings --summary
  starter findings --repo 'github.com/acme/*' --state open --status present
  starter findings --rule github-pat --since 2026-01-01 --json
  starter findings acme/api --format sarif > gitfleet.sarif
  starter findings --repo 'github.com/acme/*' --format sarif --out sarif/
  starter findings resolve acme/api 5f0c7a1e --reason revoked --comment "rotated"`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if all && cmd.Flags().Changed("limit") {
				return usageError{errors.New("--limit and --all do not go together")}
			}
			if limit < 1 && !all {
				return usageError{errors.New("--limit must be at least 1")}
			}
			if ff.allRepos && len(in) == 1 {
				return usageError{errors.New("--all-repos lists every repository: give no target with it")}
			}
			if all {
				limit = 0
			}
			fleet := len(in) == 0 || ff.used(cmd)
			var f store.FleetFilter
			if fleet {
				if occurrences {
					return usageError{errors.New("--occurrences lists one repository's secrets: use --format for every occurrence")}
				}
				var err error
				if f, err = ff.filter(func() (*scan.RuleSet, error) { return a.loadRules("") }); err != nil {
					return err
				}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			var what string
			if len(in) == 1 {
				key, w, err := a.shardKeyOf(cmd.Context(), st, in[0], sel)
				if err != nil {
					return err
				}
				sh, err := st.ShardByKey(cmd.Context(), key)
				if err != nil {
					return err
				}
				if sh == nil {
					return usageError{fmt.Errorf("%s has not been scanned yet", w)}
				}
				if !fleet {
					return a.repoFindings(cmd.Context(), st, sh, w, limit, occurrences)
				}
				f.ShardID, what = sh.ID, w
			}
			switch {
			case ff.summary:
				return a.findingsSummary(cmd.Context(), st, f, ff.top, what)
			case ff.format != "":
				return a.exportFindings(cmd.Context(), st, f, ff.format, ff.out)
			}
			return a.fleetFindings(cmd.Context(), st, f, ff.after, limit)
		},
	}
	sel.add(cmd)
	ff.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 1000, "list at most this many secrets")
	cmd.Flags().BoolVar(&all, "all", false, "list every secret")
	cmd.Flags().BoolVar(&occurrences, "occurrences", false, "list every occurrence (file:line, commit, status, other paths of the same file) beneath its secret")
	cmd.AddCommand(a.findingsResolveCmd(), a.findingsReopenCmd(), a.findingsShowCmd(), a.findingsValidateCmd())
	return cmd
}

// repoFindings lists one repository's secrets, oldest first, with their
// occurrences on request.
func (a *app) repoFindings(ctx context.Context, st *store.Store, sh *store.Shard, what string, limit int, occurrences bool) error {
	l, err := listFindings(ctx, st, sh, limit, occurrences)
	if err != nil {
		return err
	}
	more := ""
	if int64(len(l.secrets)) < l.total {
		more = fmt.Sprintf("showing %s of %s (use --limit or --all)\n", thousands(int64(len(l.secrets))), thousands(l.total))
	}
	ignored := ""
	if l.ignored > 0 {
		ignored = fmt.Sprintf("%s ignored by the repository's .gitleaksignore or gitleaks:allow, not listed (--ignored lists them)\n",
			count(l.ignored, "secret", "secrets"))
	}
	if a.json {
		fmt.Fprint(a.stderr, more)
		return a.printJSON(findingsJSON{Shard: sh, Total: l.total, TotalOccurrences: l.totalOccurrences, Ignored: l.ignored,
			Shown: len(l.secrets), Findings: l.secrets})
	}
	fmt.Fprintf(a.stdout, "%s: shard %d is %s, %s in %s\n", what, sh.ID, sh.Status,
		count(l.total, "secret", "secrets"), count(l.totalOccurrences, "occurrence", "occurrences"))
	if len(l.secrets) > 0 {
		var table bytes.Buffer
		w := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "RULE\tFIRST SEEN\tCOMMIT\tOCCURRENCES\tSTATUS\tSTATE\tVALIDITY\tPREVIEW\tSECRET HASH")
		for _, s := range l.secrets {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.RuleID, location(s.Location), short(s.Commit),
				count(s.Occurrences, "occurrence", "occurrences"), s.Status, stateText(s.State, s.SeenAgain), validityText(s.Validity),
				withDecoded(dash(textsafe.Printable(s.Preview)), s.Decoded), dash(short(s.SecretHash)))
			for _, o := range s.List {
				fmt.Fprintf(w, "\t  %s\t%s\t\t%s\t\t\t\t\n", location(o.Location), short(o.Commit), occurrenceStatus(o))
				for _, p := range o.AlsoAt {
					fmt.Fprintf(w, "\t    also at %s\t\t\t\t\t\t\t\n", location(store.Location{Path: p, Archive: o.Archive, Line: o.Line}))
				}
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		// Occurrence rows leave the last columns empty: no trailing blanks.
		for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
			fmt.Fprintln(a.stdout, strings.TrimRight(line, " "))
		}
	}
	fmt.Fprint(a.stdout, ignored)
	fmt.Fprint(a.stdout, more)
	return nil
}

// occurrenceStatus is an occurrence's status, with the suppression that
// applies to it.
func occurrenceStatus(o store.Occurrence) string {
	if o.Ignored != "" {
		return string(o.Status) + ", ignored (" + o.Ignored + ")"
	}
	return string(o.Status)
}

// stateText is a triage state as listings show it.
func stateText(state string, seenAgain bool) string {
	if state == "" {
		state = store.StateOpen
	}
	if seenAgain {
		return state + " (seen again after resolution)"
	}
	return state
}

// withDecoded marks a preview of a secret found inside encoded text.
func withDecoded(preview, decoded string) string {
	if decoded == "" {
		return preview
	}
	return preview + " (decoded " + decoded + ")"
}

// secretListing is a secret with its triage state and, on request, its
// occurrences.
type secretListing struct {
	store.Secret
	State     string             `json:"state"`
	SeenAgain bool               `json:"seenAgainAfterResolution,omitempty"`
	Validity  *store.Validity    `json:"validity,omitempty"`
	List      []store.Occurrence `json:"occurrences,omitempty"`
}

type findingsJSON struct {
	Shard *store.Shard `json:"shard"`
	// Total secrets and occurrences; Shown secrets are listed; Ignored
	// secrets are suppressed by the repository and not listed.
	Total            int64           `json:"total"`
	TotalOccurrences int64           `json:"totalOccurrences"`
	Ignored          int64           `json:"ignored"`
	Shown            int             `json:"shown"`
	Findings         []secretListing `json:"findings"`
}

type listing struct {
	secrets                          []secretListing
	total, totalOccurrences, ignored int64
}

// findingsPage is how many secrets or occurrences one query reads.
var findingsPage = 1000

// listFindings reads up to limit secrets (0: all) of a shard's newest
// scope, a page at a time, with their triage states, and with occurrences
// every occurrence of each.
func listFindings(ctx context.Context, st *store.Store, sh *store.Shard, limit int, occurrences bool) (listing, error) {
	l := listing{secrets: []secretListing{}}
	scope, err := st.LatestScope(ctx, sh.ID)
	if err != nil || scope == 0 {
		return l, err
	}
	var after int64
	for first := true; limit == 0 || len(l.secrets) < limit; first = false {
		size := findingsPage
		if limit > 0 {
			size = min(size, limit-len(l.secrets))
		}
		p, err := st.Secrets(ctx, scope, store.Page{After: after, Limit: size})
		if err != nil {
			return l, err
		}
		if first {
			l.total, l.totalOccurrences, l.ignored = p.Total, p.TotalOccurrences, p.Ignored
		}
		keys := make([]store.SecretKey, len(p.Secrets))
		for i, s := range p.Secrets {
			keys[i] = s.SecretKey
		}
		states, err := st.SecretStates(ctx, sh.Key, scope, keys)
		if err != nil {
			return l, err
		}
		subjects := make([]string, len(keys))
		for i := range subjects {
			subjects[i] = sh.Key
		}
		checks, err := st.Validities(ctx, subjects, keys)
		if err != nil {
			return l, err
		}
		for _, s := range p.Secrets {
			t := states[s.SecretKey]
			x := secretListing{Secret: s, State: t.State, SeenAgain: t.SeenAgain}
			if v, ok := checks[sh.Key][s.SecretKey]; ok {
				x.Validity = &v
			}
			l.secrets = append(l.secrets, x)
		}
		if len(p.Secrets) < size {
			break
		}
		after = p.Secrets[len(p.Secrets)-1].Cursor
	}
	if !occurrences {
		return l, nil
	}
	at := make(map[store.SecretKey]int, len(l.secrets))
	for i, s := range l.secrets {
		at[s.SecretKey] = i
	}
	for start := 0; start < len(l.secrets); start += findingsPage {
		keys := make([]store.SecretKey, 0, findingsPage)
		for _, s := range l.secrets[start:min(start+findingsPage, len(l.secrets))] {
			keys = append(keys, s.SecretKey)
		}
		for after := int64(0); ; {
			p, err := st.Occurrences(ctx, scope, keys, store.Page{After: after, Limit: findingsPage})
			if err != nil {
				return l, err
			}
			for _, o := range p.Occurrences {
				if i, ok := at[o.SecretKey]; ok {
					l.secrets[i].List = append(l.secrets[i].List, o)
				}
			}
			if len(p.Occurrences) < findingsPage {
				break
			}
			after = p.Occurrences[len(p.Occurrences)-1].Cursor
		}
	}
	return l, nil
}

// fleetJSON is a page of the fleet's secrets; Next continues it (--after)
// when More.
type fleetJSON struct {
	Secrets []store.FleetSecret `json:"secrets"`
	Shown   int                 `json:"shown"`
	More    bool                `json:"more"`
	Next    int64               `json:"next,omitempty"`
}

// fleetFindings lists the secrets f selects, newest first, limit of them
// (0: all) after the cursor after; never cut without saying where to go on.
func (a *app) fleetFindings(ctx context.Context, st *store.Store, f store.FleetFilter, after int64, limit int) error {
	var out []store.FleetSecret
	more := false
	for {
		size := findingsPage
		if limit > 0 {
			size = min(size, limit-len(out)+1) // one more says whether there are more
		}
		page, err := st.FleetSecrets(ctx, f, store.Page{After: after, Limit: size})
		if err != nil {
			return err
		}
		out = append(out, page...)
		if limit > 0 && len(out) > limit {
			out, more = out[:limit], true
			break
		}
		if len(page) < size {
			break
		}
		after = page[len(page)-1].Cursor
	}
	var next int64
	if more {
		next = out[len(out)-1].Cursor
	}
	if a.json {
		if out == nil {
			out = []store.FleetSecret{}
		}
		return a.printJSON(fleetJSON{Secrets: out, Shown: len(out), More: more, Next: next})
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "no secrets")
		return nil
	}
	var table bytes.Buffer
	w := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "REPOSITORY\tRULE\tFIRST SEEN\tCOMMIT\tOCCURRENCES\tSTATUS\tSTATE\tVALIDITY\tPREVIEW\tSECRET HASH")
	for _, s := range out {
		status := string(s.Status)
		if s.Ignored != "" {
			status += ", ignored (" + s.Ignored + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", textsafe.Printable(s.Repository), s.RuleID, location(s.Location), short(s.Commit),
			count(s.Occurrences, "occurrence", "occurrences"), status, stateText(s.State, s.SeenAgain), validityText(s.Validity),
			withDecoded(dash(textsafe.Printable(s.Preview)), s.Decoded), dash(short(s.SecretHash)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprint(a.stdout, table.String())
	if more {
		fmt.Fprintf(a.stdout, "showing %s; more after this one: add --after %d (or --all, or --summary to count them)\n",
			count(int64(len(out)), "secret", "secrets"), next)
	}
	return nil
}

// findingsSummary counts the secrets f selects.
func (a *app) findingsSummary(ctx context.Context, st *store.Store, f store.FleetFilter, top int, what string) error {
	s, err := st.Summary(ctx, f, top)
	if err != nil {
		return err
	}
	v, err := st.SummarizeValidity(ctx, f)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			store.FleetSummary
			Validity store.ValiditySummary `json:"validity"`
		}{s, v})
	}
	where := "across " + count(s.Repositories, "repository", "repositories")
	if what != "" {
		where = "in " + textsafe.Printable(what)
	}
	fmt.Fprintf(a.stdout, "%s %s\n", count(s.Secrets, "secret", "secrets"), where)
	if s.Ignored > 0 && !f.Ignored && !f.IgnoredOnly {
		fmt.Fprintf(a.stdout, "%s ignored by the repositories' .gitleaksignore or gitleaks:allow, not counted (--ignored counts them)\n",
			count(s.Ignored, "more secret", "more secrets"))
	}
	type row struct {
		name  string
		count int64
	}
	var sections [][]row
	titled := func(title string, cs []store.Count) []row {
		rows := []row{{title, -1}}
		for _, c := range cs {
			rows = append(rows, row{"  " + textsafe.Printable(c.Name), c.Count})
		}
		return rows
	}
	// Valid first: the secrets that work now are the ones to act on.
	sections = append(sections, []row{{"by validity (checked with the provider)", -1}, {"  valid", v.Valid}, {"  invalid", v.Invalid},
		{"    of which revoked (seen valid before)", v.Revoked}, {"  unknown", v.Unknown}, {"  not checked", v.Unchecked}})
	sections = append(sections, append(titled("by state", s.ByState), row{"  seen again after resolution", s.SeenAgain}))
	sections = append(sections, titled("by rule family (top "+strconv.Itoa(top)+")", s.ByFamily))
	if what == "" {
		sections = append(sections, titled("by repository (top "+strconv.Itoa(top)+")", s.ByRepository))
	}
	width, digits := 0, len("secrets")
	for _, rows := range sections {
		for _, r := range rows {
			width, digits = max(width, len(r.name)), max(digits, len(thousands(r.count)))
		}
	}
	for _, rows := range sections {
		fmt.Fprintln(a.stdout)
		for _, r := range rows {
			n := "secrets"
			if r.count >= 0 {
				n = thousands(r.count)
			}
			fmt.Fprintf(a.stdout, "%-*s  %*s\n", width, r.name, digits, n)
		}
	}
	return nil
}

// sarifLimits are code scanning's limits on a run (the tests lower them).
var sarifLimits = struct{ results, shown int64 }{report.MaxResultsPerRun, report.ShownResultsPerRun}

// exportFindings writes every occurrence of the secrets f selects as a
// report, to stdout or, with out, one file per repository in that
// directory. SARIF is one log per repository: several without out are
// refused (exit 2), as is a repository past code scanning's limits.
func (a *app) exportFindings(ctx context.Context, st *store.Store, f store.FleetFilter, format, out string) error {
	rs, err := a.loadRules("")
	if err != nil {
		return err
	}
	var rules []report.Rule
	for _, r := range rs.Rules() {
		rules = append(rules, report.Rule{ID: r.ID, Description: r.Description, Tags: r.Tags})
	}
	// gitfleet has no public address for the driver's informationUri: a
	// caller that has one (a deployment's documentation) sets it.
	tool := report.Tool{Name: "gitfleet", Version: report.BuildVersion()}
	repos, err := st.FleetRepositories(ctx, f)
	if err != nil {
		return err
	}
	// gitleaks' report carries what gitleaks compares in a baseline,
	// read from each repository where this host has it.
	var enrich func(store.FleetSecret, store.Occurrence, *report.Occurrence)
	if format == "gitleaks" {
		details := newGitleaksDetails(a.cfg.MirrorDir, rs)
		byShard := make(map[int64]store.FleetRepository, len(repos))
		for _, r := range repos {
			byShard[r.ShardID] = r
		}
		enrich = func(s store.FleetSecret, o store.Occurrence, ro *report.Occurrence) {
			if r, ok := byShard[s.ShardID]; ok {
				ro.Gitleaks = details.detail(r, o)
			}
		}
		defer func() {
			if len(details.missing) == 0 {
				return
			}
			var names []string
			for _, n := range details.missing {
				names = append(names, textsafe.Printable(n))
			}
			sort.Strings(names)
			fmt.Fprintf(a.stderr, "not readable from this host: %s; their findings lack columns, entropy, author, date and message, "+
				"so gitleaks takes them as new (run the export where GITFLEET_MIRROR_DIR holds the worker's mirrors)\n",
				strings.Join(names, ", "))
		}()
	}
	if format != "sarif" && out == "" {
		w, _, err := report.New(format, a.stdout, tool, rules)
		if err != nil {
			return err
		}
		if err := writeOccurrences(ctx, st, f, w, enrich); err != nil {
			return err
		}
		return w.Close()
	}
	if format == "sarif" {
		if out == "" && len(repos) > 1 {
			names := make([]string, 0, 3)
			for _, r := range repos[:min(3, len(repos))] {
				names = append(names, textsafe.Printable(r.Repository))
			}
			if len(repos) > 3 {
				names = append(names, "…")
			}
			return usageError{fmt.Errorf("the selection holds %d repositories (%s): a SARIF log is of one repository "+
				"(code scanning attaches its results to that repository's files); give --out DIR for one file each, or name one repository",
				len(repos), strings.Join(names, ", "))}
		}
		var over []string
		for _, r := range repos {
			if r.Occurrences > sarifLimits.results {
				over = append(over, fmt.Sprintf("%s (%s)", textsafe.Printable(r.Repository), thousands(r.Occurrences)))
			}
		}
		if len(over) > 0 {
			return usageError{fmt.Errorf("more results than the %s GitHub code scanning takes in a run (it shows the %s most severe): %s; "+
				"narrow the selection (--state open, --status present, --rule)", thousands(sarifLimits.results),
				thousands(sarifLimits.shown), strings.Join(over, ", "))}
		}
		for _, r := range repos {
			if r.Occurrences > sarifLimits.shown {
				fmt.Fprintf(a.stderr, "%s: %s; code scanning shows only the %s most severe\n", textsafe.Printable(r.Repository),
					count(r.Occurrences, "result", "results"), thousands(sarifLimits.shown))
			}
		}
		if out == "" {
			var w report.Writer
			if len(repos) == 0 {
				w, err = report.NewSARIF(a.stdout, tool, rules)
			} else {
				w, err = report.NewRepositorySARIF(a.stdout, tool, rules, sarifRepository(repos[0]))
			}
			if err != nil {
				return err
			}
			if err := writeOccurrences(ctx, st, f, w, nil); err != nil {
				return err
			}
			return w.Close()
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	names := map[string]bool{}
	for _, r := range repos {
		name := reportFileName(r.Repository, format, names)
		one := f
		one.ShardID = r.ShardID
		if err := writeReportFile(filepath.Join(out, name), func(file io.Writer) (report.Writer, error) {
			if format == "sarif" {
				return report.NewRepositorySARIF(file, tool, rules, sarifRepository(r))
			}
			w, _, err := report.New(format, file, tool, rules)
			return w, err
		}, func(w report.Writer) error { return writeOccurrences(ctx, st, one, w, enrich) }); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s  %s, %s\n", filepath.Join(out, name), textsafe.Printable(r.Repository),
			count(r.Occurrences, "occurrence", "occurrences"))
	}
	if len(repos) == 0 {
		fmt.Fprintln(a.stdout, "no secrets: no file written")
	}
	return nil
}

// writeReportFile writes a report to path whole or not at all: to a
// temporary file beside it, renamed over it once closed.
func writeReportFile(path string, open func(io.Writer) (report.Writer, error), fill func(report.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w, err := open(tmp)
	if err == nil {
		err = fill(w)
	}
	if err == nil {
		err = w.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// reportFileName is the file a repository's report is written to: its
// name with every character but letters, digits, '.', '-' and '_' as '_'
// (host_owner_name.sarif), never hidden, and with a digest of the name
// where two names would meet (taken records the names given).
func reportFileName(repository, format string, taken map[string]bool) string {
	ext := map[string]string{"sarif": ".sarif", "gitleaks": ".json", "csv": ".csv"}[format]
	b := []byte(strings.TrimPrefix(repository, "/"))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	name := string(b)
	if len(name) > 150 {
		name = name[:150]
	}
	if name == "" || name[0] == '.' {
		name = "_" + name
	}
	if taken[strings.ToLower(name)] { // case-insensitive file systems too
		sum := sha256.Sum256([]byte(repository))
		name += "-" + hex.EncodeToString(sum[:4])
	}
	taken[strings.ToLower(name)] = true
	return name + ext
}

// sarifRepository is what a repository's SARIF log says of it: its URI
// and the commit scanned at its default branch (a scan target's main,
// master or only ref).
func sarifRepository(r store.FleetRepository) report.Repository {
	out := report.Repository{Name: r.Repository}
	switch u, err := url.Parse(r.Location); {
	case r.Local:
		out.URI = (&url.URL{Scheme: "file", Path: r.Location}).String()
	case err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		out.URI = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimSuffix(u.Path, ".git")}).String()
	default:
		out.URI = "https://" + r.Repository
	}
	var candidates []string
	if r.DefaultBranch != "" {
		candidates = append(candidates, "refs/heads/"+r.DefaultBranch)
	}
	candidates = append(candidates, "HEAD", "refs/heads/main", "refs/heads/master")
	for _, ref := range candidates {
		if c, ok := r.Tips[ref]; ok {
			out.Branch, out.Commit = ref, c
			if ref == "HEAD" {
				out.Branch = ""
			}
			return out
		}
	}
	if len(r.Tips) == 1 {
		for ref, c := range r.Tips {
			out.Branch, out.Commit = ref, c
		}
	}
	return out
}

// writeOccurrences writes every occurrence of the secrets f selects to w,
// a page of secrets at a time: constant memory however many. enrich, if
// any, adds to each what the store does not keep.
func writeOccurrences(ctx context.Context, st *store.Store, f store.FleetFilter, w report.Writer,
	enrich func(store.FleetSecret, store.Occurrence, *report.Occurrence)) error {
	withIgnored := f.Ignored || f.IgnoredOnly
	return st.EachOccurrence(ctx, f, findingsPage, func(s store.FleetSecret, o store.Occurrence) error {
		if o.Ignored != "" && !withIgnored {
			return nil
		}
		ro := reportOccurrence(s, o)
		if enrich != nil {
			enrich(s, o, &ro)
		}
		return w.Write(ro)
	})
}

// reportOccurrence is an occurrence of s as the reports take it; a
// collected repository's has a link to the file at the commit.
func reportOccurrence(s store.FleetSecret, o store.Occurrence) report.Occurrence {
	r := s.Report(o)
	if strings.HasPrefix(s.Subject, "codebase:") {
		r.Link = "https://" + s.Repository + "/blob/" + url.PathEscape(o.Commit) + "/" + (&url.URL{Path: o.Path}).EscapedPath()
		if o.Line > 0 && o.Archive == "" {
			r.Link += "#L" + strconv.Itoa(o.Line)
		}
	}
	return r
}
