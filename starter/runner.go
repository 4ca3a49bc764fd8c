package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/store"
)

func (a *app) runnerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runner",
		Short: "The runners that hold snapshots",
		Long: `Runners are 'worker --runner-id ID --store DIR' processes: each registers
itself, heartbeats, keeps snapshot images in its store and serves them to
its peers. A draining runner keeps what it holds and takes no new pulls.`,
	}
	cmd.AddCommand(a.runnerListCmd(), a.runnerStateCmd("drain", snapshot.RunnerDraining, "Take no new snapshots on a runner (it keeps serving what it holds)"),
		a.runnerStateCmd("resume", snapshot.RunnerReady, "Let a drained runner take snapshots again"))
	return cmd
}

func (a *app) runnerListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "Every runner with its state, heartbeat and snapshots",
		Example: `  starter runner list`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			runners, err := st.Runners(cmd.Context())
			if err != nil {
				return err
			}
			type item struct {
				snapshot.Runner
				Ready   int `json:"readySnapshots"`
				Pulling int `json:"pullingSnapshots"`
				Errors  int `json:"errorSnapshots"`
			}
			items := make([]item, len(runners))
			for i, r := range runners {
				items[i].Runner = r
				rows, err := st.RunnerSnapshots(cmd.Context(), r.ID)
				if err != nil {
					return err
				}
				for _, row := range rows {
					switch {
					case row.State == snapshot.RowReady:
						items[i].Ready++
					case row.State.InFlight():
						items[i].Pulling++
					case row.State == snapshot.RowError:
						items[i].Errors++
					}
				}
			}
			if a.json {
				return a.printJSON(items)
			}
			if len(items) == 0 {
				fmt.Fprintln(a.stdout, "No runners. Start one with 'worker --runner-id ID --store DIR'.")
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "RUNNER\tSTATE\tHEARTBEAT\tPEER\tCAPACITY\tQUOTA\tSNAPSHOTS")
			for _, it := range items {
				quota := "-"
				if it.QuotaBytes > 0 {
					quota = bytesHuman(it.QuotaBytes)
				}
				// A runner registers its own address: escaped, as anything
				// a process other than the starter wrote.
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%d ready, %d pulling, %d error\n", textsafe.Printable(it.ID),
					textsafe.Printable(string(it.State)), ago(it.LastHeartbeat), textsafe.Printable(it.PeerAddr), it.Capacity, quota,
					it.Ready, it.Pulling, it.Errors)
			}
			return w.Flush()
		},
	}
}

func (a *app) runnerStateCmd(verb string, state snapshot.RunnerState, short string) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " ID",
		Short:   short,
		Example: "  starter runner " + verb + " r1",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if err := snapshot.ValidRunnerID(in[0]); err != nil {
				return usageError{err}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			err = st.SetRunnerState(cmd.Context(), in[0], state, time.Now().UTC())
			if errors.Is(err, store.ErrNotFound) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Runner %s is %s\n", in[0], state)
			return nil
		},
	}
}
