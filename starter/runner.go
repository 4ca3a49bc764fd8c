package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitfleet/activities"
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
			runners, err := st.RunnerStatuses(cmd.Context())
			if err != nil {
				return err
			}
			slices.SortFunc(runners, func(x, y store.RunnerStatus) int { return naturalCompare(x.ID, y.ID) })
			type item struct {
				snapshot.Runner
				// Silent is the heartbeat's age, by the database's clock.
				Silent  float64 `json:"silentSeconds"`
				Ready   int     `json:"readySnapshots"`
				Pulling int     `json:"pullingSnapshots"`
				Errors  int     `json:"errorSnapshots"`
			}
			items := make([]item, len(runners))
			for i, r := range runners {
				items[i].Runner = r.Runner
				items[i].State = a.runnerState(r)
				items[i].Silent = r.Silent.Seconds()
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
			for i, it := range items {
				quota := "-"
				if it.QuotaBytes > 0 {
					quota = bytesHuman(it.QuotaBytes)
				}
				// A runner registers its own address: escaped, as anything
				// a process other than the starter wrote.
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%d ready, %d pulling, %d error\n", textsafe.Printable(it.ID),
					textsafe.Printable(string(it.State)), ago(time.Now().Add(-runners[i].Silent)), textsafe.Printable(it.PeerAddr), it.Capacity, quota,
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

// Runner states shown beside the table's own: derived from the heartbeat's
// age when read.
const (
	// runnerSilent: a runner that has missed a few heartbeats; it still
	// gets pulls until it is offline, but is most likely gone.
	runnerSilent snapshot.RunnerState = "silent"
)

// runnerState is what a runner is, by its row and its heartbeat's age at
// read time: its row says ready until the reconcile (every few minutes)
// takes it offline, but a runner silent past GITFLEET_RUNNER_OFFLINE_AFTER
// is offline already, and one that missed a few heartbeats is silent.
func (a *app) runnerState(r store.RunnerStatus) snapshot.RunnerState {
	switch {
	case r.State == snapshot.RunnerOffline:
		return r.State
	case r.Silent > a.runnerOfflineAfter():
		return snapshot.RunnerOffline
	case r.Silent > a.runnerSilentAfter():
		return runnerSilent
	}
	return r.State
}

// runnerOfflineAfter is the reconcile's offline threshold (its default
// when unset, as workflows.PullTiming's Fresh).
func (a *app) runnerOfflineAfter() time.Duration { return cmp.Or(a.cfg.RunnerOffline, 2*time.Minute) }

// runnerSilentAfter is how long a runner may go without a heartbeat before
// it is taken for stopped (and gets no new pulls): a few of its heartbeat
// intervals.
func (a *app) runnerSilentAfter() time.Duration {
	return activities.WorkflowSettings(a.cfg).RunnerSilentAfter()
}

// naturalCompare orders names with their digit runs as numbers: r2 before
// r10 (and r02 before r2: equal numbers compare as text).
func naturalCompare(x, y string) int {
	return cmp.Or(naturalOrder(x, y), strings.Compare(x, y))
}

func naturalOrder(x, y string) int {
	for x != "" && y != "" {
		dx, dy := digitRun(x), digitRun(y)
		if dx > 0 && dy > 0 {
			nx, ny := strings.TrimLeft(x[:dx], "0"), strings.TrimLeft(y[:dy], "0")
			if c := cmp.Or(cmp.Compare(len(nx), len(ny)), strings.Compare(nx, ny)); c != 0 {
				return c
			}
			x, y = x[dx:], y[dy:]
			continue
		}
		if x[0] != y[0] {
			return cmp.Compare(x[0], y[0])
		}
		x, y = x[1:], y[1:]
	}
	return cmp.Compare(len(x), len(y))
}

// digitRun is the length of the run of ASCII digits s starts with.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// span writes a duration the short way: 2m, 1m30s, 45s, 1h.
func span(d time.Duration) string {
	out := d.Round(time.Second).String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}
