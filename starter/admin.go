package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/workflows"
)

func (a *app) migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations (the worker also does this on start)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			applied, err := st.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			version, err := st.SchemaVersion(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"applied": applied, "version": version})
			}
			for _, m := range applied {
				fmt.Fprintf(a.stdout, "applied %s\n", m.Source)
			}
			fmt.Fprintf(a.stdout, "schema is at version %d\n", version)
			return nil
		},
	}
}

func (a *app) cleanupCmd() *cobra.Command {
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "cleanup-stale",
		Short: "Delete codebases whose repository has been gone for more than 30 days",
		Long: `cleanup-stale runs the CleanupStale workflow now: codebases marked stale
(their repository no longer exists) for longer than --older-than are deleted
with their whole history. A daily schedule does the same.`,
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
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", workflows.StaleRetention, "delete codebases stale for longer than this")
	return cmd
}
