package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"gitfleet/activities"
	"gitfleet/workflows"
)

func (a *app) schedulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Manage gitfleet's Temporal Schedules (" + strings.Join(scheduleIDs(), ", ") + ")",
		Long: `gitfleet keeps these Temporal Schedules, created or updated by every worker on
start (and by 'schedules apply'):

` + scheduleHelp() + `
How often: GITFLEET_SWEEP_EVERY (default 1h), GITFLEET_RECONCILE_EVERY (5m),
GITFLEET_CLEANUP_EVERY (24h), GITFLEET_REVALIDATE_EVERY (24h); webhook-redelivery
runs every 10m.

They are ordinary Temporal Schedules: 'temporal schedule list' and
'temporal schedule trigger --schedule-id ...' work on them too.`,
	}
	cmd.AddCommand(a.schedulesApplyCmd(), a.schedulesListCmd(),
		a.scheduleActionCmd("trigger", "Start a scheduled workflow now", func(h client.ScheduleHandle, cmd *cobra.Command, note string) error {
			return h.Trigger(cmd.Context(), client.ScheduleTriggerOptions{})
		}),
		a.scheduleActionCmd("pause", "Pause a schedule", func(h client.ScheduleHandle, cmd *cobra.Command, note string) error {
			return h.Pause(cmd.Context(), client.SchedulePauseOptions{Note: note})
		}),
		a.scheduleActionCmd("unpause", "Resume a paused schedule", func(h client.ScheduleHandle, cmd *cobra.Command, note string) error {
			return h.Unpause(cmd.Context(), client.ScheduleUnpauseOptions{Note: note})
		}))
	return cmd
}

func (a *app) schedulesApplyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "apply",
		Short: "Create the schedules, or bring them back to this configuration",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.temporal(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			sc := activities.WorkflowSettings(a.cfg).Schedules()
			if err := workflows.EnsureSchedules(cmd.Context(), c, sc); err != nil {
				return err
			}
			var applied []string
			for _, id := range scheduleIDs() {
				applied = append(applied, id+" every "+workflows.Schedules(sc)[id].Spec.Intervals[0].Every.String())
			}
			fmt.Fprintf(a.stdout, "schedules applied: %s\n", strings.Join(applied, ", "))
			return nil
		},
	}
}

type scheduleInfo struct {
	ID       string   `json:"id"`
	Paused   bool     `json:"paused"`
	Note     string   `json:"note,omitempty"`
	Every    []string `json:"every"`
	Actions  int64    `json:"actions"`
	Running  int      `json:"running"`
	NextRuns []string `json:"nextRuns,omitempty"`
}

func (a *app) schedulesListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List gitfleet's schedules with their state and next runs",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.temporal(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			var out []scheduleInfo
			for _, id := range scheduleIDs() {
				d, err := c.ScheduleClient().GetHandle(cmd.Context(), id).Describe(cmd.Context())
				if err != nil {
					return fmt.Errorf("schedule %s: %w (a worker creates it on start; or run 'starter schedules apply')", id, err)
				}
				info := scheduleInfo{ID: id, Paused: d.Schedule.State.Paused, Note: d.Schedule.State.Note,
					Actions: int64(d.Info.NumActions), Running: len(d.Info.RunningWorkflows)}
				for _, iv := range d.Schedule.Spec.Intervals {
					info.Every = append(info.Every, iv.Every.String())
				}
				for _, t := range d.Info.NextActionTimes {
					info.NextRuns = append(info.NextRuns, when(t))
				}
				out = append(out, info)
			}
			if a.json {
				return a.printJSON(out)
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SCHEDULE\tSTATE\tEVERY\tRUNS SO FAR\tRUNNING\tNEXT")
			for _, s := range out {
				state := "active"
				if s.Paused {
					state = "paused"
					if s.Note != "" {
						state += " (" + s.Note + ")"
					}
				}
				next := "-"
				if len(s.NextRuns) > 0 {
					next = s.NextRuns[0]
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", s.ID, state, strings.Join(s.Every, ","), s.Actions, s.Running, next)
			}
			return w.Flush()
		},
	}
}

// scheduleIDs are the schedules workflows.Schedules defines, sorted: the
// one list every worker creates, so a schedule added there is listed,
// applied and triggered here without a second list to keep in step.
func scheduleIDs() []string {
	ids := slices.Collect(maps.Keys(workflows.Schedules(workflows.ScheduleConfig{})))
	slices.Sort(ids)
	return ids
}

// scheduleHelp says what each schedule does, from its note (the one the
// Web UI shows), without the "gitfleet: " prefix every note starts with.
func scheduleHelp() string {
	all := workflows.Schedules(workflows.ScheduleConfig{})
	width := 0
	for _, id := range scheduleIDs() {
		width = max(width, len(id))
	}
	var b strings.Builder
	for _, id := range scheduleIDs() {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, id, strings.TrimPrefix(all[id].Note, "gitfleet: "))
	}
	return b.String()
}

func (a *app) scheduleActionCmd(use, short string, do func(client.ScheduleHandle, *cobra.Command, string) error) *cobra.Command {
	var note string
	cmd := &cobra.Command{
		Use:       use + " <" + strings.Join(scheduleIDs(), "|") + ">",
		Short:     short,
		Args:      args(cobra.ExactArgs(1)),
		ValidArgs: scheduleIDs(),
		RunE: func(cmd *cobra.Command, in []string) error {
			if !slices.Contains(scheduleIDs(), in[0]) {
				return usageError{fmt.Errorf("unknown schedule %q: want one of %s", in[0], strings.Join(scheduleIDs(), ", "))}
			}
			c, err := a.temporal(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := do(c.ScheduleClient().GetHandle(cmd.Context(), in[0]), cmd, note); err != nil {
				return fmt.Errorf("%s %s: %w", use, in[0], err)
			}
			fmt.Fprintf(a.stdout, "%s: %s done\n", in[0], use)
			return nil
		},
	}
	if use != "trigger" {
		cmd.Flags().StringVar(&note, "note", "", "why (shown in the Web UI and 'schedules list')")
	}
	return cmd
}
