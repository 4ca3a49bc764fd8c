package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/domain/archive"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/reach"
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
		run, err := startScan(ctx, c, t, maxDuration)
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

// startScan starts the scan of t, or joins the one running for it: under
// its id, or under the id an older starter gave it (a local repository by
// its base name), so that a scan started before the ids changed is not run
// twice at once.
func startScan(ctx context.Context, c client.Client, t target.Target, maxDuration time.Duration) (client.WorkflowRun, error) {
	if legacy := workflows.LegacyScanWorkflowID(t); legacy != workflows.ScanWorkflowID(t) {
		// Not found (the usual case) or unreadable: start under the new id;
		// the shard's fence keeps two runs from both writing anyway.
		if d, err := c.DescribeWorkflowExecution(ctx, legacy, ""); err == nil &&
			d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return c.GetWorkflow(ctx, legacy, d.GetWorkflowExecutionInfo().GetExecution().GetRunId()), nil
		}
	}
	return c.ExecuteWorkflow(ctx, workflows.ScanOptions(t), workflows.ExecuteShard, workflows.ExecuteShardInput{
		Spec:        shard.Spec{Key: t.Key(), Target: t},
		MaxDuration: maxDuration,
	})
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
		found := false
		for _, p := range []string{filepath.Join(t.Location, ".git"), filepath.Join(t.Location, "HEAD")} {
			if _, err := os.Stat(p); err == nil {
				found = true
			}
		}
		if !found {
			return usageError{fmt.Errorf("%s is not a Git repository (no .git and no HEAD)", t.Location)}
		}
		// Where this machine's settings say where local repositories lie,
		// the workers' presumably say the same: refuse here what they would.
		if a.cfg.LocalRoot != "" {
			if _, err := reach.LocalRepository(a.cfg.LocalRoot, t.Location); err != nil {
				return usageError{err}
			}
		}
		return nil
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
		if host, ok := a.readsPrivate(t.Location); ok {
			// The starter asks anonymously; the workers read with the
			// host's credentials, which the starter need not hold.
			fmt.Fprintf(a.stderr, "note: %s refuses anonymous reads; the workers read it with %s's credentials\n", t.Location, host)
			return nil
		}
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

// readsPrivate reports the configured host a URL belongs to when the
// workers read its private repositories (a GitHub App or a token file is
// configured for it: §3, "Private repositories").
func (a *app) readsPrivate(location string) (string, bool) {
	for _, n := range a.cfg.Hosts.Names() {
		h, _ := a.cfg.Hosts.Lookup(n)
		if strings.HasPrefix(strings.ToLower(location), strings.ToLower(h.GitURL)) && (h.AppID != 0 || h.TokensFile != "") {
			return n, true
		}
	}
	return "", false
}

func printShard(a *app, location string, res workflows.ExecuteShardResult) {
	fmt.Fprintf(a.stdout, "Scanned %s\n  shard     %d: %s", location, res.ShardID, res.Status)
	if res.ParkReason != "" {
		fmt.Fprintf(a.stdout, " (%s)", errclass.Explain(res.ParkReason))
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
	add(c.Refused, "object refused over a limit", "objects refused over a limit")
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
	case c.Refused > 0 && c.Missing+c.Corrupt+c.Unreadable == 0:
		what = "over a limit" // the same data trips the same bound
	case c.Refused > 0:
		what = "damaged, missing or over a limit"
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
		return "", "", usageError{fmt.Errorf("%s has not been collected (try: starter collect %s)", r, r)}
	}
	if err := st.RecordView(ctx, cb.ID, time.Now()); err != nil {
		return "", "", err
	}
	return shard.CodebaseKey(cb.ID), cb.Repo().String(), nil
}
