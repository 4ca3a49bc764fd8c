package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/decay"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/store"
)

func (a *app) reposCmd() *cobra.Command {
	var parked, excluded bool
	var limit int
	cmd := &cobra.Command{
		Use:   "repos --parked | --excluded",
		Short: "The repositories that wait for an operator: parked shards, repositories out of the sweep",
		Long: `repos lists what gitfleet stopped doing on its own, and why.

--parked: shards set aside because the repository itself stops them (it is
gone, private, damaged), with the reason and since when. Nothing else parks
a shard: not a timeout, not a database or host outage. 'starter shard retry
SHARD|REPO' runs one again.

--excluded: live repositories the hourly sweep no longer refreshes, because
their collections failed ` + fmt.Sprint(decay.MaxFailures) + ` times in a row, with the last failure.
'starter collect REPO' (or 'starter shard retry REPO') brings one back.`,
		Example: `  starter repos --parked
  starter repos --excluded
  starter repos --parked --excluded --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !parked && !excluded {
				return usageError{errors.New("say what to list: --parked, --excluded or both")}
			}
			if limit < 1 {
				return usageError{errors.New("--limit must be at least 1")}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			var out struct {
				Parked *struct {
					Total  int64               `json:"total"`
					Shards []store.ParkedShard `json:"shards"`
				} `json:"parked,omitempty"`
				Excluded *struct {
					Total        int64                    `json:"total"`
					Repositories []store.ExcludedCodebase `json:"repositories"`
				} `json:"excluded,omitempty"`
			}
			if parked {
				ps, total, err := st.ParkedShards(cmd.Context(), limit)
				if err != nil {
					return err
				}
				out.Parked = &struct {
					Total  int64               `json:"total"`
					Shards []store.ParkedShard `json:"shards"`
				}{total, nonNil(ps)}
			}
			if excluded {
				es, total, err := st.ExcludedCodebases(cmd.Context(), limit)
				if err != nil {
					return err
				}
				out.Excluded = &struct {
					Total        int64                    `json:"total"`
					Repositories []store.ExcludedCodebase `json:"repositories"`
				}{total, nonNil(es)}
			}
			if a.json {
				return a.printJSON(out)
			}
			if out.Parked != nil {
				a.printParked(out.Parked.Shards, out.Parked.Total)
			}
			if out.Parked != nil && out.Excluded != nil {
				fmt.Fprintln(a.stdout)
			}
			if out.Excluded != nil {
				a.printExcluded(out.Excluded.Repositories, out.Excluded.Total)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&parked, "parked", false, "list the parked shards")
	cmd.Flags().BoolVar(&excluded, "excluded", false, "list the repositories out of the sweep")
	cmd.Flags().IntVar(&limit, "limit", 100, "list at most this many of each")
	return cmd
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *app) printParked(ps []store.ParkedShard, total int64) {
	if total == 0 {
		fmt.Fprintln(a.stdout, "No parked shards.")
		return
	}
	fmt.Fprintf(a.stdout, "Parked shards: %d (run one again: starter shard retry SHARD|REPO)\n", total)
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tPARKED SINCE\tREASON\tREPOSITORY OR TARGET")
	for _, p := range ps {
		what := p.Location
		if p.Repo != nil {
			what = p.Repo.String()
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", p.ID, when(p.Since), dash(errclass.Explain(p.Reason)), what)
	}
	_ = w.Flush()
	if more := total - int64(len(ps)); more > 0 {
		fmt.Fprintf(a.stdout, "… and %d more (--limit)\n", more)
	}
}

func (a *app) printExcluded(es []store.ExcludedCodebase, total int64) {
	if total == 0 {
		fmt.Fprintln(a.stdout, "No repositories out of the sweep.")
		return
	}
	fmt.Fprintf(a.stdout, "Out of the sweep: %d (bring one back: starter collect REPO)\n", total)
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "REPOSITORY\tCODEBASE\tFAILURES\tLAST FAILURE\tREASON")
	for _, e := range es {
		at, reason := "-", "its change checks failed"
		if e.LastFailureAt != nil {
			at, reason = when(*e.LastFailureAt), e.Message
			if e.Class != "" {
				reason = e.Class + ": " + reason
			}
		}
		fmt.Fprintf(w, "%s\t%d\t%d in a row\t%s\t%s\n", e.Repo, e.ID, e.Failures, at, reason)
	}
	_ = w.Flush()
	if more := total - int64(len(es)); more > 0 {
		fmt.Fprintf(a.stdout, "… and %d more (--limit)\n", more)
	}
}
