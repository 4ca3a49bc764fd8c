package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/store"
)

func (a *app) shardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "The shards scans continue: run a parked one again",
		Long: `A shard is what the scans of one collected repository, or of one scan
request, continue from: its watermarks, its seen blobs, its holes. A shard
is parked when the repository itself stops it (gone, private, damaged), never
for the infrastructure's trouble; a parked shard waits for an operator:
'starter repos --parked' lists them with their reasons.`,
	}
	cmd.AddCommand(a.shardRetryCmd())
	return cmd
}

func (a *app) shardRetryCmd() *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:     "retry <SHARD | host/owner/name | owner/name>",
		Aliases: []string{"resume"},
		Short:   "Un-park a shard and run it again at once",
		Long: `retry makes a parked shard Active again and starts its work: for a
repository's shard its collection (as 'starter collect' does, which also
clears the failure streak that took it out of the sweep), for a scan
request's shard its scan. The work continues from the shard's watermarks.
Unless --no-wait is given, it waits and prints the outcome.

SHARD is the number (or the key) 'starter repos --parked' lists; a
repository name means its codebase's shard. A shard that is not parked is
run again all the same. 'resume' is the same command.`,
		Example: `  starter shard retry 12
  starter shard retry github.com/octocat/Hello-World
  starter shard resume octocat/Hello-World --no-wait`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			ctx := cmd.Context()
			st, err := a.store(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			sh, repo, err := a.findShard(ctx, st, in[0])
			if err != nil {
				return err
			}
			was, parked, err := st.Unpark(ctx, sh.ID)
			if err != nil {
				return err
			}
			if was == nil {
				return usageError{fmt.Errorf("shard %d no longer exists", sh.ID)}
			}
			// With --json, standard output is the outcome's JSON alone.
			note := a.stdout
			if a.json {
				note = a.stderr
			}
			a.printUnpark(note, was, parked, repo)
			c, err := a.temporal(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if repo != nil {
				return a.collect(ctx, c, []repoid.ID{*repo}, !noWait)
			}
			return a.scan(ctx, c, []target.Target{was.Target}, 0, !noWait)
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the work and return at once")
	return cmd
}

func (a *app) printUnpark(w io.Writer, sh *store.Shard, parked bool, repo *repoid.ID) {
	what := sh.Location
	if repo != nil {
		what = repo.String()
	}
	if parked {
		fmt.Fprintf(w, "Shard %d (%s) un-parked: it was parked for %q\n", sh.ID, what, sh.ParkReason)
		return
	}
	fmt.Fprintf(w, "Shard %d (%s) is %s, not parked: running it again\n", sh.ID, what, sh.Status)
}

// findShard finds the shard an operator names: by number, by key, or by
// its codebase's repository name (current or former). It also returns the
// repository of a codebase's shard. Naming nothing that exists is bad
// input: nothing is started.
func (a *app) findShard(ctx context.Context, st *store.Store, arg string) (*store.Shard, *repoid.ID, error) {
	var sh *store.Shard
	var err error
	switch id, perr := strconv.ParseInt(arg, 10, 64); {
	case perr == nil:
		sh, err = st.ShardByID(ctx, id)
	case strings.HasPrefix(arg, "codebase:"), strings.HasPrefix(arg, "target:"):
		sh, err = st.ShardByKey(ctx, arg)
	default:
		r, perr := a.cfg.Hosts.Parse(arg)
		if perr != nil {
			return nil, nil, perr
		}
		cb, err := st.FindCodebase(ctx, r)
		if err == nil && cb == nil {
			cb, err = st.CodebaseByFormerName(ctx, r)
		}
		if err != nil {
			return nil, nil, err
		}
		if cb == nil {
			return nil, nil, usageError{fmt.Errorf("%s has not been collected (try: starter collect %s)", r, r)}
		}
		if sh, err = st.ShardByKey(ctx, shard.CodebaseKey(cb.ID)); err != nil {
			return nil, nil, err
		}
		if sh == nil {
			return nil, nil, usageError{fmt.Errorf("%s has never been scanned: it has no shard (try: starter collect %s)", cb.Repo(), cb.Repo())}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if sh == nil {
		return nil, nil, usageError{fmt.Errorf("shard %s does not exist (starter repos --parked lists the parked ones)", arg)}
	}
	if sh.CodebaseID == 0 {
		return sh, nil, nil
	}
	cb, err := st.CodebaseByID(ctx, sh.CodebaseID)
	if err != nil {
		return nil, nil, err
	}
	if cb == nil {
		return nil, nil, usageError{fmt.Errorf("shard %d's codebase %d no longer exists", sh.ID, sh.CodebaseID)}
	}
	repo := cb.Repo()
	return sh, &repo, nil
}
