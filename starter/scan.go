package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/domain/archive"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

type selectionFlags struct {
	refs, commits []string
}

func (f *selectionFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.refs, "ref", nil, "scan this ref (branch, tag or full ref name); repeatable; default: every branch and tag")
	cmd.Flags().StringArrayVar(&f.commits, "commit", nil, "scan the history of this commit (full id); repeatable")
}

func (f *selectionFlags) normalize(locations []string) (target.Normalized, error) {
	reqs := make([]target.Request, len(locations))
	for i, l := range locations {
		reqs[i] = target.Request{Location: l, Refs: f.refs, Commits: f.commits}
	}
	n, err := target.Normalize(reqs)
	if err != nil {
		return n, usageError{err}
	}
	return n, nil
}

func (a *app) scanCmd() *cobra.Command {
	var sel selectionFlags
	var noWait bool
	var maxDuration time.Duration
	cmd := &cobra.Command{
		Use:   "scan <url | path>...",
		Short: "Scan repositories for secrets, incrementally and exactly once",
		Long: `scan runs one ExecuteShard workflow per target: it mirrors the repository,
scans every blob it has not seen before with the rule set, and records the
findings — where each secret was first seen, a keyed hash and a short
redacted preview, never the secret itself.

Targets are normalized: the same repository written differently is one
target, and submitting the same request again continues where the last
scan stopped. Local paths must be readable by the workers.`,
		Example: `  starter scan https://github.com/octocat/Hello-World
  starter scan ./my-repo --ref main --ref release
  starter scan https://ghe.example.com/platform/api --commit 3f1c…(40 hex digits)`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			n, err := sel.normalize(in)
			if err != nil {
				return err
			}
			if n.StrippedCredentials {
				fmt.Fprintln(a.stderr, "note: credentials in URLs were dropped; workers use their own configuration")
			}
			for _, t := range n.Targets {
				if err := a.checkTarget(cmd.Context(), t); err != nil {
					return err
				}
			}
			c, err := a.temporal(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			return a.scan(cmd.Context(), c, n.Targets, maxDuration, !noWait)
		},
	}
	sel.add(cmd)
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the scans and return at once")
	cmd.Flags().DurationVar(&maxDuration, "max-duration", 0, "stop each scan after this long (the next scan continues); 0 = no limit")
	return cmd
}

func (a *app) scan(ctx context.Context, c client.Client, targets []target.Target, maxDuration time.Duration, wait bool) error {
	runs := make([]client.WorkflowRun, len(targets))
	for i, t := range targets {
		key := t.Key()
		run, err := c.ExecuteWorkflow(ctx, workflows.ScanOptions(t), workflows.ExecuteShard, workflows.ExecuteShardInput{
			Spec:        shard.Spec{Key: key, Target: t},
			MaxDuration: maxDuration,
		})
		if err != nil {
			return fmt.Errorf("start the scan of %s: %w", t.Location, err)
		}
		runs[i] = run
		if !a.json {
			fmt.Fprintf(a.stdout, "Scanning %s\n  workflow  %s\n  web ui    %s\n", t.Location, run.GetID(), a.uiLink(run.GetID(), run.GetRunID()))
		}
	}
	if !wait {
		return nil
	}
	failed := 0
	var results []workflows.ExecuteShardResult
	for i, run := range runs {
		var res workflows.ExecuteShardResult
		stop := a.watchAttempts(ctx, c, run.GetID(), run.GetRunID(), targets[i].Location)
		err := run.Get(ctx, &res)
		stop()
		if parked, ok := workflows.ParkedResult(err); ok { // a parked shard fails its run
			res, err = parked, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped waiting (the scans go on; see the Web UI): %w", ctx.Err())
			}
			msg, class := failure(err)
			fmt.Fprintf(a.stderr, "FAILED %s (%s): %s\n", targets[i].Location, class, msg)
			failed++
			continue
		}
		if res.Status == shard.Parked {
			failed++
		}
		results = append(results, res)
		if !a.json {
			printShard(a, targets[i].Location, res)
		}
	}
	if a.json {
		if err := a.printJSON(results); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d scans failed or were parked", failed, len(runs))
	}
	return nil
}

// checkTarget refuses, before anything starts, a local path that is not a
// Git repository and a URL whose host says it holds none (not found, or
// refused: private). A host that cannot be reached now is left to the
// workers, which retry.
func (a *app) checkTarget(ctx context.Context, t target.Target) error {
	if t.Local {
		fi, err := os.Stat(t.Location)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return usageError{fmt.Errorf("%s: no such directory", t.Location)}
		case err != nil:
			return usageError{fmt.Errorf("%s: %w", t.Location, err)}
		case !fi.IsDir():
			return usageError{fmt.Errorf("%s is not a directory (a Git repository is)", t.Location)}
		}
		for _, p := range []string{filepath.Join(t.Location, ".git"), filepath.Join(t.Location, "HEAD")} {
			if _, err := os.Stat(p); err == nil {
				return nil
			}
		}
		return usageError{fmt.Errorf("%s is not a Git repository (no .git and no HEAD)", t.Location)}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := mirror.ListRefs(ctx, t.Location)
	if err == nil {
		return nil
	}
	switch c := errclass.Classify(err); {
	case c.Reason == errclass.ReasonEmptyRepository:
		return nil
	case c.Reason == errclass.ReasonNotFound, c.Reason == errclass.ReasonPermissionDenied:
		return usageError{fmt.Errorf("%s: not found (or private: set GITHUB_TOKEN)", t.Location)}
	case c.Class == errclass.Permanent:
		return usageError{fmt.Errorf("%s is not a Git repository URL gitfleet can scan: %v", t.Location, err)}
	}
	if cause := errclass.UnreachableCause(err); cause != "" {
		fmt.Fprintf(a.stderr, "note: cannot reach %s now (%s); the workers try a few more times, for about %s, then give up\n",
			t.Location, cause, unreachableSpan().Round(time.Second))
		return nil
	}
	fmt.Fprintf(a.stderr, "note: could not reach %s now (%v); the workers will retry\n", t.Location, err)
	return nil
}

func printShard(a *app, location string, res workflows.ExecuteShardResult) {
	fmt.Fprintf(a.stdout, "Scanned %s\n  shard     %d: %s", location, res.ShardID, res.Status)
	if res.ParkReason != "" {
		fmt.Fprintf(a.stdout, " (%s)", res.ParkReason)
	}
	fmt.Fprintln(a.stdout)
	if r := res.Receipt; r != nil {
		state := "complete"
		switch {
		case r.Complete:
		case res.Status == shard.Active:
			state = "partial: the next scan continues"
		default:
			state = "partial: scanning again would skip the same"
		}
		fmt.Fprintf(a.stdout, "  scanned   %s, %s (%s), %s skipped; %s\n", count(r.Commits, "commit", "commits"),
			count(r.BlobsScanned, "blob", "blobs"), bytesHuman(r.BytesScanned), thousands(r.BlobsSkipped+r.EarlierOversized), state)
		if why := skipReasons(r.Counts); why != "" {
			fmt.Fprintf(a.stdout, "  skipped   %s\n", why)
		}
		if why := archiveSkips(r.Counts); why != "" {
			fmt.Fprintf(a.stdout, "  archives  %s\n", why)
		}
		if r.Holes > 0 {
			fmt.Fprintf(a.stdout, "  holes     %s unreadable now, tried again by the next scan\n", count(r.Holes, "blob", "blobs"))
		}
		if r.Lost > 0 {
			fmt.Fprintf(a.stdout, "  lost      %s\n", lostObjects(r.Lost, r.Counts))
		}
		fmt.Fprintf(a.stdout, "  findings  %s (secrets first seen by this scan)\n", count(r.Findings, "new finding", "new findings"))
	}
}

// skipReasons says what a scan skipped, and why, in words; "" when nothing.
func skipReasons(c shard.Counts) string {
	var why []string
	add := func(n int64, one, many string) {
		if n > 0 {
			why = append(why, count(n, one, many))
		}
	}
	add(c.Missing, "object missing from the repository", "objects missing from the repository")
	add(c.Corrupt, "blob with damaged data", "blobs with damaged data")
	add(c.Unreadable, "unreadable blob", "unreadable blobs")
	add(c.Oversized, "oversized blob", "oversized blobs")
	add(c.EarlierOversized, "oversized blob an earlier scan skipped (never scanned)", "oversized blobs earlier scans skipped (never scanned)")
	add(c.Binary, "binary blob", "binary blobs")
	if c.OutOfTime {
		why = append(why, "the time budget ran out")
	}
	add(c.RefsIgnored, "ref ignored as git ignores it", "refs ignored as git ignores them")
	return strings.Join(why, ", ")
}

// lostObjects says that the holes no scan can fill are the repository's
// own damage, and that scanning again will not help.
func lostObjects(n int64, c shard.Counts) string {
	what := "damaged or missing"
	switch {
	case c.Missing == 0 && c.Corrupt+c.Unreadable > 0:
		what = "damaged"
	case c.Corrupt+c.Unreadable == 0 && c.Missing > 0:
		what = "missing"
	}
	pronoun := "it"
	if n != 1 {
		pronoun = "them"
	}
	return fmt.Sprintf("%s %s in the repository; re-scan will not recover %s", count(n, "object", "objects"), what, pronoun)
}

// archiveSkips says what the scan left out of the archives it opened, and
// why, in words; "" when nothing.
func archiveSkips(c shard.Counts) string {
	var why []string
	for _, r := range archive.Reasons() {
		if n := c.ArchiveSkips.Of(r); n > 0 {
			why = append(why, count(n, "archive entry", "archive entries")+" skipped: "+r.Describe())
		}
	}
	return strings.Join(why, "; ")
}

func bytesHuman(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func (a *app) findingsCmd() *cobra.Command {
	var sel selectionFlags
	var limit int
	var all, occurrences bool
	cmd := &cobra.Command{
		Use:   "findings <host/owner/name | owner/name | url | path>",
		Short: "List the secrets found in a collected repository or a scan target",
		Long: `findings lists what the scans found under the current rule set, one line per
secret however many files, versions and commits hold it. A secret is a rule
and a keyed hash of what it matched (equal hashes are the same secret; the
secret itself is never stored); for a rule that matches file names only,
each matching path is a secret. Each line gives the rule, the file:line and
commit where the secret was first seen, its occurrences (every blob
version and offset holding it), whether it is still present, a short
redacted preview and the start of its hash. A secret in a file inside an
archive (a jar, a zip, a tarball, a .gz) is at the archive's path, "!" and
the file's path in it, as gitleaks writes it: dist/app.jar!config/app.env:3
(--json: "archive" is the path inside).

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

--occurrences lists every occurrence beneath its secret, with its own
status. At most --limit secrets are listed, and when there are more the
output says how many; --all lists every one.

A collected repository is named like for 'show' (this counts as a view); a
scan target is given as it was scanned, with the same --ref/--commit.`,
		Example: `  starter findings octocat/Hello-World
  starter findings ./my-repo --occurrences
  starter findings https://ghe.example.com/platform/api --all --json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if all && cmd.Flags().Changed("limit") {
				return usageError{errors.New("--limit and --all do not go together")}
			}
			if limit < 1 && !all {
				return usageError{errors.New("--limit must be at least 1")}
			}
			if all {
				limit = 0
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			key, what, err := a.shardKeyOf(cmd.Context(), st, in[0], sel)
			if err != nil {
				return err
			}
			sh, err := st.ShardByKey(cmd.Context(), key)
			if err != nil {
				return err
			}
			if sh == nil {
				return fmt.Errorf("%s has not been scanned yet", what)
			}
			l, err := listFindings(cmd.Context(), st, sh.ID, limit, occurrences)
			if err != nil {
				return err
			}
			more := ""
			if int64(len(l.secrets)) < l.total {
				more = fmt.Sprintf("showing %s of %s (use --limit or --all)\n", thousands(int64(len(l.secrets))), thousands(l.total))
			}
			if a.json {
				fmt.Fprint(a.stderr, more)
				return a.printJSON(findingsJSON{Shard: sh, Total: l.total, TotalOccurrences: l.totalOccurrences,
					Shown: len(l.secrets), Findings: l.secrets})
			}
			fmt.Fprintf(a.stdout, "%s: shard %d is %s, %s in %s\n", what, sh.ID, sh.Status,
				count(l.total, "secret", "secrets"), count(l.totalOccurrences, "occurrence", "occurrences"))
			if len(l.secrets) > 0 {
				var table bytes.Buffer
				w := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "RULE\tFIRST SEEN\tCOMMIT\tOCCURRENCES\tSTATUS\tPREVIEW\tSECRET HASH")
				for _, s := range l.secrets {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.RuleID, location(s.Location), short(s.Commit),
						count(s.Occurrences, "occurrence", "occurrences"), s.Status, withDecoded(dash(textsafe.Printable(s.Preview)), s.Decoded), dash(short(s.SecretHash)))
					for _, o := range s.List {
						fmt.Fprintf(w, "\t  %s\t%s\t\t%s\t\t\n", location(o.Location), short(o.Commit), o.Status)
						for _, p := range o.AlsoAt {
							fmt.Fprintf(w, "\t    also at %s\t\t\t\t\t\n", location(store.Location{Path: p, Archive: o.Archive, Line: o.Line}))
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
			fmt.Fprint(a.stdout, more)
			return nil
		},
	}
	sel.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 1000, "list at most this many secrets")
	cmd.Flags().BoolVar(&all, "all", false, "list every secret")
	cmd.Flags().BoolVar(&occurrences, "occurrences", false, "list every occurrence (file:line, commit, status, other paths of the same file) beneath its secret")
	return cmd
}

// withDecoded marks a preview of a secret found inside encoded text.
func withDecoded(preview, decoded string) string {
	if decoded == "" {
		return preview
	}
	return preview + " (decoded " + decoded + ")"
}

// secretListing is a secret with, on request, its occurrences.
type secretListing struct {
	store.Secret
	List []store.Occurrence `json:"occurrences,omitempty"`
}

type findingsJSON struct {
	Shard *store.Shard `json:"shard"`
	// Total secrets and occurrences; Shown secrets are listed.
	Total            int64           `json:"total"`
	TotalOccurrences int64           `json:"totalOccurrences"`
	Shown            int             `json:"shown"`
	Findings         []secretListing `json:"findings"`
}

type listing struct {
	secrets                 []secretListing
	total, totalOccurrences int64
}

// findingsPage is how many secrets or occurrences one query reads.
var findingsPage = 1000

// listFindings reads up to limit secrets (0: all) of a shard's newest
// scope, a page at a time, and with occurrences every occurrence of each.
func listFindings(ctx context.Context, st *store.Store, shardID int64, limit int, occurrences bool) (listing, error) {
	l := listing{secrets: []secretListing{}}
	scope, err := st.LatestScope(ctx, shardID)
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
			l.total, l.totalOccurrences = p.Total, p.TotalOccurrences
		}
		for _, s := range p.Secrets {
			l.secrets = append(l.secrets, secretListing{Secret: s})
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

// location is where a finding is, as gitleaks writes it: a file in an
// archive after the archive's path and "!". A repository names its
// files: the bytes a terminal would act on are escaped (§11).
func location(l store.Location) string {
	at := textsafe.Printable(l.Path)
	if l.Archive != "" {
		at += archive.Separator + textsafe.Printable(l.Archive)
	}
	if l.Line == 0 { // a path-only rule's finding: the file itself
		return at
	}
	return fmt.Sprintf("%s:%d", at, l.Line)
}

// count is n and the noun that goes with it: "1 secret", "1,200 secrets".
func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

// thousands writes n with a comma every three digits.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// shardKeyOf finds the shard a user means: a scan target (a URL, or a path
// that exists) or a collected repository by name.
func (a *app) shardKeyOf(ctx context.Context, st *store.Store, arg string, sel selectionFlags) (key, what string, err error) {
	if _, statErr := os.Stat(arg); strings.Contains(arg, "://") || statErr == nil {
		n, err := sel.normalize([]string{arg})
		if err != nil {
			return "", "", err
		}
		return n.Targets[0].Key(), n.Targets[0].Location, nil
	}
	if len(sel.refs) > 0 || len(sel.commits) > 0 {
		return "", "", usageError{errors.New("--ref and --commit go with scan targets, not collected repositories")}
	}
	r, err := a.cfg.Hosts.Parse(arg)
	if err != nil {
		return "", "", err
	}
	cb, err := st.FindCodebase(ctx, r)
	if err != nil {
		return "", "", err
	}
	if cb == nil {
		return "", "", fmt.Errorf("%s has not been collected (try: starter collect %s)", r, r)
	}
	if err := st.RecordView(ctx, cb.ID, time.Now()); err != nil {
		return "", "", err
	}
	return shard.CodebaseKey(cb.ID), cb.Repo().String(), nil
}
