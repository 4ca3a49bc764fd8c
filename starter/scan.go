package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"gitfleet/internal/domain/shard"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"gitfleet/internal/domain/target"
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
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       workflows.ShardWorkflowID(key),
			TaskQueue:                workflows.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.SAShard.ValueSet(key)),
		}, workflows.ExecuteShard, workflows.ExecuteShardInput{
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
		if err := run.Get(ctx, &res); err != nil {
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

func printShard(a *app, location string, res workflows.ExecuteShardResult) {
	fmt.Fprintf(a.stdout, "Scanned %s\n  shard     %d: %s", location, res.ShardID, res.Status)
	if res.ParkReason != "" {
		fmt.Fprintf(a.stdout, " (%s)", res.ParkReason)
	}
	fmt.Fprintln(a.stdout)
	if r := res.Receipt; r != nil {
		state := "complete"
		if !r.Complete {
			state = "partial: the next scan continues"
		}
		fmt.Fprintf(a.stdout, "  scanned   %d commits, %d blobs (%s), %d skipped; %s\n", r.Commits, r.BlobsScanned,
			bytesHuman(r.BytesScanned), r.BlobsSkipped, state)
		fmt.Fprintf(a.stdout, "  findings  %d new\n", r.Findings)
	}
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
	cmd := &cobra.Command{
		Use:   "findings <host/owner/name | owner/name | url | path>",
		Short: "List the secrets found in a collected repository or a scan target",
		Long: `findings lists what the scans found under the current rule set: rule, file
and line where each secret was first seen, the commit, a short redacted
preview and a keyed hash (equal hashes are the same secret). The secret
itself is never stored.

A collected repository is named like for 'show' (this counts as a view); a
scan target is given as it was scanned, with the same --ref/--commit.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if limit < 1 {
				return usageError{errors.New("--limit must be at least 1")}
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
			fs, err := st.Findings(cmd.Context(), sh.ID, limit)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"shard": sh, "findings": fs})
			}
			fmt.Fprintf(a.stdout, "%s: shard %d is %s, %d findings\n", what, sh.ID, sh.Status, len(fs))
			if len(fs) == 0 {
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "RULE\tLOCATION\tCOMMIT\tPREVIEW\tSECRET HASH")
			for _, f := range fs {
				fmt.Fprintf(w, "%s\t%s:%d\t%s\t%s\t%s\n", f.RuleID, f.Path, f.Line, short(f.Commit), f.Preview, short(f.SecretHash))
			}
			return w.Flush()
		},
	}
	sel.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 1000, "list at most this many findings")
	return cmd
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
