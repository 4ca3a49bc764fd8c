package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"gitfleet/activities"
	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/domain/repoid"
	"gitfleet/workflows"
)

func (a *app) collectCmd() *cobra.Command {
	var noWait, archived, refresh bool
	var org, user string
	cmd := &cobra.Command{
		Use:   "collect <host/owner/name | owner/name | https URL>...",
		Short: "Collect repositories: mirror them and resolve their identity",
		Long: `Collect starts one Collect workflow per repository and, unless --no-wait is
given, waits for each and prints its identity case, codebase and commit.

Concurrent requests for the same repository share one workflow run.
Every name is checked before anything starts; credentials in URLs are refused.
With --org, the organization's repositories are listed from the user's GitHub
cache (fetched on its first use; the output says how old it is) and --refresh
fetches them from GitHub first; collections start only while fewer than
GITFLEET_SWEEP_MAX_RUNNING (default 100) Collect runs run, fleet-wide, as the
sweep's do.`,
		Example: `  starter collect github.com/octocat/Hello-World
  starter collect octocat/Hello-World https://github.com/octocat/Spoon-Knife
  starter collect --no-wait ghe.example.com/platform/api
  starter collect --org acme --user alice        # every repository of acme alice can see
  starter collect --org acme --user alice --refresh`,
		Args: func(cmd *cobra.Command, in []string) error {
			if org != "" || user != "" {
				if org == "" || user == "" || len(in) > 0 {
					return usageError{fmt.Errorf("--org and --user go together, without repository names")}
				}
				return nil
			}
			if refresh {
				return usageError{fmt.Errorf("--refresh goes with --org and --user")}
			}
			return args(cobra.MinimumNArgs(1))(cmd, in)
		},
		RunE: func(cmd *cobra.Command, in []string) error {
			if org != "" {
				return a.collectOrg(cmd.Context(), user, org, archived, refresh, !noWait)
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
	cmd.Flags().BoolVar(&refresh, "refresh", false, "with --org: fetch the organization's repositories from GitHub first, not from the cache")
	return cmd
}

// collectOrg lists the organization through the user's GitHub cache
// (fetching it first if it never was, or if refresh) and runs CollectOrg,
// which starts the ordinary Collects in bounded windows.
func (a *app) collectOrg(ctx context.Context, user, org string, archived, refresh, wait bool) error {
	st, err := a.store(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	asked := time.Now()
	l, err := a.cache(st).Repos(ctx, user, ghaccount.Filter{Org: org, IncludeArchived: archived}, refresh)
	if err != nil {
		return a.cacheError(err)
	}
	if refresh && l.RefreshErr != nil {
		// Asked for GitHub's list now: collecting the cache's instead
		// would miss what it misses, unsaid.
		return fmt.Errorf("%w; nothing started (the cache holds %s, %s: run without --refresh to collect those)",
			l.RefreshErr, plural(len(l.Repos), "repository", "repositories"), l.Age(time.Now()))
	}
	age := l.Age(time.Now())
	if !l.Refreshed && l.RefreshedAt.Before(asked) {
		// Not fetched for this command (a cold cache is, on the way in,
		// and says "cached just now"): repositories created upstream
		// since are not in it.
		age = "listed from the cache, " + age + "; --refresh to fetch it anew"
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
	}, workflows.CollectOrg, workflows.CollectOrgInput{UserID: l.User.ID, Org: org, IncludeArchived: archived,
		// The sweep's bound: both count every running Collect.
		MaxRunning: activities.WorkflowSettings(a.cfg).SweepMaxRunning})
	if err != nil {
		return fmt.Errorf("start the collection of %s: %w", org, err)
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "Collecting %s: %s in %s's GitHub cache (%s)\n  workflow  %s\n  web ui    %s\n",
			org, plural(len(l.Repos), "repository", "repositories"), user, age, id, a.uiLink(id, run.GetRunID()))
	}
	host, ok := a.cfg.Hosts.ByAPIURL(l.User.APIURL)
	if !ok {
		return fmt.Errorf("user %s belongs to %s, which is not configured here", user, l.User.APIURL)
	}
	repos := make([]repoid.ID, len(l.Repos))
	for i, r := range l.Repos {
		repos[i] = repoid.ID{Host: host.Name, Owner: r.Owner, Name: r.Name}
	}
	if !wait {
		if !a.json {
			fmt.Fprintf(a.stdout, "Started: the collections start in windows and go on without this command. Follow them with\n"+
				"  temporal workflow list --query 'WorkflowType=\"Collect\" AND WorkflowId STARTS_WITH \"collect:%s/%s/\"'\n"+
				"or run this command again without --no-wait: it joins the collections running and waits for them.\n",
				host.Name, strings.ToLower(org))
		}
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
			if !a.json {
				fmt.Fprintf(a.stdout, "Started: %s; waiting for the collections\n", res)
			}
			tally, err := a.waitCollections(ctx, c, repos)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(orgOutcome{CollectOrgProgress: res, Outcomes: tally})
			}
			fmt.Fprintf(a.stdout, "Done: %s of %s: %s\n", plural(tally.total(), "collection", "collections"), org, tally)
			if bad := tally.Failed + tally.Parked + tally.Cancelled + res.Failed; bad > 0 {
				return fmt.Errorf("%s of %s did not collect", plural(bad, "repository", "repositories"), org)
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

// orgTally counts how an organization's collections ended.
type orgTally struct {
	Collected int `json:"collected"`
	Failed    int `json:"failed"`
	Parked    int `json:"parked"`
	Cancelled int `json:"cancelled"`
}

func (t orgTally) total() int { return t.Collected + t.Failed + t.Parked + t.Cancelled }

func (t orgTally) String() string {
	return fmt.Sprintf("%d collected, %d failed, %d parked, %d cancelled", t.Collected, t.Failed, t.Parked, t.Cancelled)
}

type orgOutcome struct {
	workflows.CollectOrgProgress
	Outcomes orgTally `json:"outcomes"`
}

// waitCollections waits for the Collect of each repository (the latest
// run under its id: the one CollectOrg started or joined), saying how
// many ended and how, as they end, and naming each that did not collect.
func (a *app) waitCollections(ctx context.Context, c client.Client, repos []repoid.ID) (orgTally, error) {
	type ended struct {
		repo repoid.ID
		err  error
	}
	results := make(chan ended)
	next := make(chan repoid.ID)
	const waiters = 8 // each waits on one run at a time: a long poll, no load
	for range min(waiters, len(repos)) {
		go func() {
			for r := range next {
				var res workflows.CollectResult
				err := c.GetWorkflow(ctx, workflows.CollectWorkflowID(r), "").Get(ctx, &res)
				select {
				case results <- ended{r, err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(next)
		for _, r := range repos {
			select {
			case next <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	var t orgTally
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	told := ""
	for t.total() < len(repos) {
		select {
		case e := <-results:
			var app *temporal.ApplicationError
			switch {
			case e.err == nil:
				t.Collected++
				continue
			case temporal.IsCanceledError(e.err):
				t.Cancelled++
			case errors.As(e.err, &app) && strings.Contains(app.Message(), "is parked"):
				t.Parked++
			default:
				t.Failed++
			}
			if !a.json {
				msg, class := failure(e.err)
				fmt.Fprintf(a.stdout, "  FAILED    %s (%s): %s\n", e.repo, class, msg)
			}
		case <-tick.C:
			if line := fmt.Sprintf("%d of %d done: %s", t.total(), len(repos), t); !a.json && line != told {
				told = line
				fmt.Fprintf(a.stdout, "  waiting   %s\n", line)
			}
		case <-ctx.Done():
			return t, fmt.Errorf("stopped waiting after %d of %d collections (they go on; see the Web UI): %w", t.total(), len(repos), ctx.Err())
		}
	}
	return t, nil
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
		run, err := c.ExecuteWorkflow(ctx, workflows.CollectOptions(r), workflows.Collect, workflows.CollectInput{Repo: r, Trigger: workflows.TriggerManual})
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
		stop := a.watchAttempts(ctx, c, run.GetID(), run.GetRunID(), repos[i].String())
		err := run.Get(ctx, &res)
		stop()
		if err != nil {
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
	if res.ScanCurrent {
		fmt.Fprintf(a.stdout, "  scan      not needed: the branches, tags and rules of its last scan (starter findings %s)\n", res.Repository)
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
