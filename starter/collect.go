package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/domain/repoid"
	"gitfleet/workflows"
)

func (a *app) collectCmd() *cobra.Command {
	var noWait, archived bool
	var org, user string
	cmd := &cobra.Command{
		Use:   "collect <host/owner/name | owner/name | https URL>...",
		Short: "Collect repositories: mirror them and resolve their identity",
		Long: `Collect starts one Collect workflow per repository and, unless --no-wait is
given, waits for each and prints its identity case, codebase and commit.

Concurrent requests for the same repository share one workflow run.
Every name is checked before anything starts; credentials in URLs are refused.`,
		Example: `  starter collect github.com/octocat/Hello-World
  starter collect octocat/Hello-World https://github.com/octocat/Spoon-Knife
  starter collect --no-wait ghe.example.com/platform/api
  starter collect --org acme --user alice        # every repository of acme alice can see`,
		Args: func(cmd *cobra.Command, in []string) error {
			if org != "" || user != "" {
				if org == "" || user == "" || len(in) > 0 {
					return usageError{fmt.Errorf("--org and --user go together, without repository names")}
				}
				return nil
			}
			return args(cobra.MinimumNArgs(1))(cmd, in)
		},
		RunE: func(cmd *cobra.Command, in []string) error {
			if org != "" {
				return a.collectOrg(cmd.Context(), user, org, archived, !noWait)
			}
			repos := make([]repoid.ID, 0, len(in))
			for _, s := range in {
				r, err := a.cfg.Hosts.Parse(s)
				if err != nil {
					return err
				}
				repos = append(repos, r)
			}
			c, err := a.temporal(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			return a.collect(cmd.Context(), c, repos, !noWait)
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the workflows and return at once")
	cmd.Flags().StringVar(&org, "org", "", "collect every repository of this organization (with --user)")
	cmd.Flags().StringVar(&user, "user", "", "whose GitHub view lists the organization's repositories (with --org)")
	cmd.Flags().BoolVar(&archived, "include-archived", false, "with --org: archived repositories too")
	return cmd
}

// collectOrg lists the organization through the user's GitHub cache
// (fetching it first if it never was) and runs CollectOrg, which starts the
// ordinary Collects in bounded windows.
func (a *app) collectOrg(ctx context.Context, user, org string, archived, wait bool) error {
	st, err := a.store(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	l, err := a.cache(st).Repos(ctx, user, ghaccount.Filter{Org: org, IncludeArchived: archived}, false)
	if err != nil {
		return a.cacheError(err)
	}
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	id := workflows.CollectOrgWorkflowID(user, org)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		Memo:                     map[string]any{"organization": org, "user": user},
	}, workflows.CollectOrg, workflows.CollectOrgInput{UserID: l.User.ID, Org: org, IncludeArchived: archived})
	if err != nil {
		return fmt.Errorf("start the collection of %s: %w", org, err)
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "Collecting %s: %s in %s's GitHub cache (%s)\n  workflow  %s\n  web ui    %s\n",
			org, plural(len(l.Repos), "repository", "repositories"), user, l.Age(time.Now()), id, a.uiLink(id, run.GetRunID()))
	}
	if !wait {
		return nil
	}
	done := make(chan error, 1)
	var res workflows.CollectOrgProgress
	go func() { done <- run.Get(ctx, &res) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		select {
		case err := <-done:
			if err != nil {
				msg, _ := failure(err)
				return fmt.Errorf("collection of %s: %s", org, msg)
			}
			if a.json {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.stdout, "Done: %s\n", res)
			if res.Failed > 0 {
				return fmt.Errorf("%s of %s failed to start", plural(res.Failed, "collection", "collections"), org)
			}
			return nil
		case <-tick.C:
			v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
			if err != nil {
				continue // between runs (continue-as-new): ask again
			}
			var p workflows.CollectOrgProgress
			if v.Get(&p) == nil && !a.json && p.String() != last {
				last = p.String()
				fmt.Fprintf(a.stdout, "  progress  %s\n", last)
			}
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting (the collection goes on; see the Web UI): %w", ctx.Err())
		}
	}
}

type collectOutcome struct {
	WorkflowID string                   `json:"workflowId"`
	RunID      string                   `json:"runId"`
	WebUI      string                   `json:"webUI"`
	Result     *workflows.CollectResult `json:"result,omitempty"`
	Error      string                   `json:"error,omitempty"`
	ErrorClass string                   `json:"errorClass,omitempty"`
}

func (a *app) collect(ctx context.Context, c client.Client, repos []repoid.ID, wait bool) error {
	runs := make([]client.WorkflowRun, len(repos))
	for i, r := range repos {
		run, err := c.ExecuteWorkflow(ctx, workflows.CollectOptions(r), workflows.Collect, workflows.CollectInput{Repo: r, Trigger: "manual"})
		if err != nil {
			return fmt.Errorf("start collection of %s: %w", r, err)
		}
		runs[i] = run
		if !a.json {
			fmt.Fprintf(a.stdout, "Collecting %s\n  workflow  %s\n  web ui    %s\n", r, run.GetID(), a.uiLink(run.GetID(), run.GetRunID()))
		}
	}
	if !wait {
		if a.json {
			out := make([]collectOutcome, len(runs))
			for i, run := range runs {
				out[i] = collectOutcome{WorkflowID: run.GetID(), RunID: run.GetRunID(), WebUI: a.uiLink(run.GetID(), run.GetRunID())}
			}
			return a.printJSON(out)
		}
		return nil
	}
	failed := 0
	outcomes := make([]collectOutcome, len(runs))
	for i, run := range runs {
		o := collectOutcome{WorkflowID: run.GetID(), RunID: run.GetRunID(), WebUI: a.uiLink(run.GetID(), run.GetRunID())}
		var res workflows.CollectResult
		if err := run.Get(ctx, &res); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped waiting (the collections go on; see the Web UI): %w", ctx.Err())
			}
			failed++
			o.Error, o.ErrorClass = failure(err)
		} else {
			o.Result = &res
		}
		outcomes[i] = o
		if !a.json {
			a.printCollect(repos[i], o)
		}
	}
	if a.json {
		if err := a.printJSON(outcomes); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %s failed", failed, plural(len(runs), "collection", "collections"))
	}
	return nil
}

// failure is the message and class of a failed workflow.
func failure(err error) (msg, class string) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message(), app.Type()
	}
	return err.Error(), ""
}

func (a *app) printCollect(r repoid.ID, o collectOutcome) {
	if o.Result == nil {
		fmt.Fprintf(a.stdout, "FAILED %s (%s): %s\n", r, o.ErrorClass, o.Error)
		return
	}
	res := o.Result
	fmt.Fprintf(a.stdout, "Collected %s\n", r)
	fmt.Fprintf(a.stdout, "  case      %s (%s)\n", res.Case, res.Case.Describe())
	fmt.Fprintf(a.stdout, "  codebase  %d  %s\n", res.CodebaseID, res.Repository)
	switch {
	case res.Empty:
		fmt.Fprintf(a.stdout, "  commit    (empty repository)\n")
	default:
		fmt.Fprintf(a.stdout, "  commit    %s (%s)\n", res.Commit, res.DefaultBranch)
	}
	if sc := res.Scan; sc != nil && sc.Receipt != nil {
		fmt.Fprintf(a.stdout, "  scan      shard %d %s: %s scanned, %s (starter findings %s)\n",
			sc.ShardID, sc.Status, count(sc.Receipt.BlobsScanned, "blob", "blobs"),
			count(sc.Receipt.Findings, "new finding", "new findings"), res.Repository)
	}
	if res.RetiredCodebaseID != 0 {
		fmt.Fprintf(a.stdout, "  retired   codebase %d (its repository no longer holds this name)\n", res.RetiredCodebaseID)
	}
	fmt.Fprintf(a.stdout, "  workflow  %s\n  web ui    %s\n", o.WorkflowID, o.WebUI)
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
