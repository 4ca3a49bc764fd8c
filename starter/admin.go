package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/workflows"
)

func (a *app) cleanupCmd() *cobra.Command {
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "cleanup-stale",
		Short: "Delete codebases whose repository has been gone for more than 30 days, and apply retention",
		Long: `cleanup-stale runs the CleanupStale workflow now: codebases marked stale
(their repository no longer exists) for longer than --older-than are deleted
with their whole history, and what the worker's retention settings
(GITFLEET_RETAIN_*) let go is deleted: old collection history and scan
receipts, results under replaced rules, unused scan requests. It works in
small batches, so it never holds a table for long. A daily schedule does the
same.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan <= 0 {
				return usageError{fmt.Errorf("--older-than must be positive")}
			}
			c, err := a.temporal(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
				ID:                       "stale-cleanup:manual",
				TaskQueue:                workflows.TaskQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			}, workflows.CleanupStale, workflows.CleanupStaleInput{MaxAge: olderThan})
			if err != nil {
				return err
			}
			var res workflows.CleanupStaleResult
			if err := run.Get(cmd.Context(), &res); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.stdout, "deleted %s (stale for more than %s)\n", count(res.Deleted, "stale codebase", "stale codebases"), olderThan)
			if r := res.Removed; r.Shards+r.Scopes+r.Collections+r.Receipts+r.Rows > 0 {
				fmt.Fprintf(a.stdout, "deleted with them and by retention: %s, %s, %s, %s, %s\n",
					count(r.Shards, "shard", "shards"), count(r.Scopes, "scope", "scopes"),
					count(r.Collections, "collection", "collections"), count(r.Receipts, "receipt", "receipts"),
					count(r.Rows, "data row", "data rows"))
			}
			if res.Removed.More {
				fmt.Fprintln(a.stdout, "more is left for the next cleanup")
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", workflows.StaleRetention, "delete codebases stale for longer than this")
	return cmd
}
