package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"gitfleet/internal/domain/repoid"
	"gitfleet/workflows"
)

func (a *app) collectCmd() *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:   "collect <host/owner/name | owner/name | https URL>...",
		Short: "Collect repositories: mirror them and resolve their identity",
		Long: `Collect starts one Collect workflow per repository and, unless --no-wait is
given, waits for each and prints its identity case, codebase and commit.

Concurrent requests for the same repository share one workflow run.
Every name is checked before anything starts; credentials in URLs are refused.`,
		Example: `  starter collect github.com/octocat/Hello-World
  starter collect octocat/Hello-World https://github.com/octocat/Spoon-Knife
  starter collect --no-wait ghe.example.com/platform/api`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
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
	return cmd
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
		return fmt.Errorf("%d of %d collections failed", failed, len(runs))
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
		fmt.Fprintf(a.stdout, "  scan      shard %d %s: %d blobs scanned, %d new findings (starter findings %s)\n",
			sc.ShardID, sc.Status, sc.Receipt.BlobsScanned, sc.Receipt.Findings, res.Repository)
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
