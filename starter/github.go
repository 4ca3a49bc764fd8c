package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/ghcache"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

func (a *app) githubCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "github",
		Short: "What a user's GitHub token can see, from gitfleet's cache",
		Long: `The GitHub cache answers from the database: the first read of a user (or
--refresh) fetches from GitHub, every page conditionally (an unchanged page
costs no quota), and replaces the cached view in one transaction. While
GitHub is down, reads keep answering from the cache with its age.`,
	}
	cmd.AddCommand(a.githubReposCmd(), a.githubOrgsCmd())
	return cmd
}

// cache is the GitHub cache; refreshes run as the per-user workflow,
// joined when one is already running.
func (a *app) cache(st *store.Store) *ghcache.Cache {
	return &ghcache.Cache{Store: st, BeforeWait: st.ReleaseIdle, AfterWait: st.Connect, Refresh: func(ctx context.Context, u store.User, seen time.Time) error {
		c, err := a.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = workflows.JoinGitHubCacheRefresh(ctx, c, u.Name, u.ID, seen)
		return err
	}}
}

func (a *app) githubReposCmd() *cobra.Command {
	var user, org string
	var refresh, archived bool
	cmd := &cobra.Command{
		Use:   "repos --user NAME [--org ORG]",
		Short: "A user's repositories: personal and from their organizations",
		Example: `  starter github repos --user alice
  starter github repos --user alice --org acme --refresh
  starter github repos --user alice --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return usageError{fmt.Errorf("--user is required")}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := a.cache(st).Repos(cmd.Context(), user, ghaccount.Filter{Org: org, IncludeArchived: archived}, refresh)
			if err != nil {
				return a.cacheError(err)
			}
			if a.json {
				if err := a.printJSON(l.Repos); err != nil {
					return err
				}
			} else {
				what := "repositories"
				if org != "" {
					what = "repositories of " + org
				}
				fmt.Fprintf(a.stdout, "%s: %s of user %s (%s)\n", plural(len(l.Repos), "repository", "repositories"), what, user, l.Age(time.Now()))
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "REPOSITORY\tSOURCE\tVISIBILITY\tDEFAULT BRANCH\tARCHIVED\tPUSHED")
				for _, r := range l.Repos {
					pushed := ""
					if !r.PushedAt.IsZero() {
						pushed = r.PushedAt.Format("2006-01-02")
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\t%s\n", r.FullName(), r.Source, r.Visibility, r.DefaultBranch, r.Archived, pushed)
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			return a.refreshFailed(l)
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the gitfleet user whose view to show (required)")
	cmd.Flags().StringVar(&org, "org", "", "only this organization's repositories")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "fetch from GitHub first")
	cmd.Flags().BoolVar(&archived, "include-archived", true, "list archived repositories too")
	return cmd
}

func (a *app) githubOrgsCmd() *cobra.Command {
	var user string
	var refresh bool
	cmd := &cobra.Command{
		Use:     "orgs --user NAME",
		Short:   "The organizations a user is a member of",
		Example: `  starter github orgs --user alice --refresh`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return usageError{fmt.Errorf("--user is required")}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := a.cache(st).Orgs(cmd.Context(), user, refresh)
			if err != nil {
				return a.cacheError(err)
			}
			if a.json {
				if err := a.printJSON(l.Orgs); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "%s of user %s (%s)\n", plural(len(l.Orgs), "organization", "organizations"), user, l.Age(time.Now()))
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ORGANIZATION\tID\tDESCRIPTION")
				for _, o := range l.Orgs {
					fmt.Fprintf(w, "%s\t%d\t%s\n", o.Login, o.ID, o.Description)
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			return a.refreshFailed(l)
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the gitfleet user whose view to show (required)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "fetch from GitHub first")
	return cmd
}

func (a *app) cacheError(err error) error {
	if errors.Is(err, ghcache.ErrUnknownUser) || errors.Is(err, ghcache.ErrNoOrganization) {
		return usageError{err}
	}
	return err
}

// refreshFailed reports a refresh that failed while the cache answered.
func (a *app) refreshFailed(l ghcache.Listing) error {
	if l.RefreshErr == nil {
		return nil
	}
	return fmt.Errorf("%w (shown: the cache as it was, %s)", l.RefreshErr, l.Age(time.Now()))
}

// plural says "1 repository", "3 repositories".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
