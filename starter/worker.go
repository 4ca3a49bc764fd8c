package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/placement"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/store"
)

func (a *app) workerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "The workers that hold the mirrors",
		Long: `Each repository's Git work — its mirror, the syncs and fetches into it, its
scans — runs on the live worker that owns it, chosen by rendezvous hashing
over the active workers with a fresh heartbeat (a worker heartbeats only
while it reaches Temporal and polls its queue). A draining worker takes no
new repositories: they go to their next owner, which clones once. A
stopped worker leaves at once ("left"); rows silent for a day are deleted.`,
	}
	cmd.AddCommand(a.workerListCmd(),
		a.workerStateCmd("drain", placement.Draining, "Hand a worker's repositories to their next owners (before taking it down for good)"),
		a.workerStateCmd("resume", placement.Active, "Let a drained worker own repositories again"))
	return cmd
}

func (a *app) workerListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "Every worker with its state, heartbeat and mirrors",
		Example: `  starter worker list`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			workers, err := st.Workers(cmd.Context())
			if err != nil {
				return err
			}
			type item struct {
				ID            string    `json:"id"`
				State         string    `json:"state"`
				LastHeartbeat time.Time `json:"lastHeartbeat"`
				Mirrors       int64     `json:"mirrors"`
				MirrorBytes   int64     `json:"mirrorBytes"`
			}
			items := make([]item, len(workers))
			for i, w := range workers {
				items[i] = item{ID: w.ID, State: a.workerState(w), LastHeartbeat: w.LastHeartbeat, Mirrors: w.Mirrors, MirrorBytes: w.MirrorBytes}
			}
			if a.json {
				return a.printJSON(items)
			}
			if len(items) == 0 {
				fmt.Fprintln(a.stdout, "No workers have registered. Start one with 'worker' (or 'make run').")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tSTATE\tHEARTBEAT\tMIRRORS\tBYTES")
			for i, it := range items {
				// The silence as the database measured it: a starter's clock
				// may be off.
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", textsafe.Printable(it.ID), it.State, ago(time.Now().Add(-workers[i].Silent)),
					it.Mirrors, bytesHuman(it.MirrorBytes))
			}
			return tw.Flush()
		},
	}
}

// workerState is what a worker's row says, with the silence read now: a
// worker that stopped (left) or is silent past
// GITFLEET_WORKER_OFFLINE_AFTER owns nothing, whatever its row says.
func (a *app) workerState(w store.Worker) string {
	if !w.Left.IsZero() {
		return "left"
	}
	if w.Silent > a.cfg.Fleet.WorkerOffline {
		return "offline"
	}
	return string(w.State)
}

func (a *app) workerStateCmd(verb string, state placement.State, short string) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " ID",
		Short:   short,
		Example: "  starter worker " + verb + " worker-1",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if err := placement.ValidWorkerID(in[0]); err != nil {
				return usageError{err}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			err = st.SetWorkerState(cmd.Context(), in[0], state)
			if errors.Is(err, store.ErrNotFound) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if state == placement.Draining {
				fmt.Fprintf(a.stdout, "Worker %s is draining: its repositories go to their next owners; it finishes the work it was given\n", in[0])
			} else {
				fmt.Fprintf(a.stdout, "Worker %s is %s\n", in[0], state)
			}
			return nil
		},
	}
}
