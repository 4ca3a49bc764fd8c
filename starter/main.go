package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/logging"
	"gitfleet/internal/infra/reach"
	"gitfleet/internal/infra/store"
)

// Exit codes.
const (
	exitFailed = 1 // the operation ran and failed
	exitUsage  = 2 // bad flags or bad input; nothing was started
)

// usageError marks errors caused by the user's input.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A misspelt setting is otherwise ignored without a word.
	for _, w := range config.Unknown(os.Environ()) {
		fmt.Fprintln(os.Stderr, w)
	}
	root := newRoot(os.Stdout, os.Stderr, os.Getenv)
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter:", errorLine(err, os.Args[1:]))
		os.Exit(exitCode(err))
	}
}

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u), errors.Is(err, repoid.ErrInvalid), errors.Is(err, snapshot.ErrInvalid):
		return exitUsage
	}
	return exitFailed
}

// app carries what subcommands share.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	cfg            config.Config
	json           bool
}

func newRoot(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv}
	root := &cobra.Command{
		Use:           "starter",
		Short:         "gitfleet's command line: collect repositories and read the results",
		Long:          rootLong(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(a.getenv)
			if err != nil {
				return usageError{err}
			}
			// The pre-checks of scan targets reach what the workers would.
			reach.SetHosts(cfg.AllowedHosts)
			a.cfg = cfg
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print JSON instead of text")
	root.AddCommand(a.collectCmd(), a.showCmd(), a.scanCmd(), a.findingsCmd(), a.schedulesCmd(), a.migrateCmd(), a.cleanupCmd(),
		a.usersCmd(), a.githubCmd(), a.snapshotCmd(), a.runnerCmd(), a.workerCmd(), a.devCmd(), a.rulesCmd(), a.setupCmd(),
		a.shardCmd(), a.reposCmd(), a.adminCmd())
	refuseUnknownSubcommands(root)
	return root
}

// rootLong is `starter --help`'s text: the settings the starter reads
// come from the settings table (config.WriteHelp), as `worker --help`'s.
func rootLong() string {
	var b strings.Builder
	b.WriteString(`starter talks to gitfleet's Temporal cluster and database.

Configuration comes from the environment (the defaults match 'make run';
docs/settings.md says more; an empty variable is unset). The starter reads:

`)
	config.WriteHelp(&b, config.Starter)
	return strings.TrimRight(b.String(), "\n")
}

// refuseUnknownSubcommands makes a word that names no subcommand a usage
// error (exit 2) on every command that only groups others: cobra's own
// check is an unmarked error on the root (exit 1) and none below it (the
// group's help, exit 0), so 'starter nosuchcmd' and 'starter schedules
// nosuch' disagreed with every other bad input.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() || c.Args != nil {
		return
	}
	c.Args = func(cmd *cobra.Command, in []string) error {
		if len(in) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", in[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(in[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
		}
		return usageError{fmt.Errorf("%s; '%s --help' lists its commands", msg, cmd.CommandPath())}
	}
	// Runnable, so that cobra checks Args; with no word it shows the help
	// as before.
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// args wraps a cobra positional-argument check so that its complaint is a
// usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, in []string) error {
		if err := check(cmd, in); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func (a *app) temporal(ctx context.Context) (client.Client, error) {
	log, _ := logging.New("warn", "console")
	opts, err := a.cfg.TemporalOptions()
	if err != nil {
		return nil, err
	}
	opts.Logger = logging.Temporal(log.WithOptions(zap.IncreaseLevel(zap.ErrorLevel)))
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (is it running? 'make run' starts one): %w", a.cfg.TemporalAddress, err)
	}
	return c, nil
}

// starterConns is the starter's pool: a command asks one query at a time,
// and a hundred starters at once must fit the server's connections.
const starterConns = 2

func (a *app) store(ctx context.Context) (*store.Store, error) {
	return store.Open(ctx, a.cfg.DatabaseURL, store.MaxConns(starterConns))
}

// uiLink is the Web UI page of a workflow run.
func (a *app) uiLink(workflowID, runID string) string {
	u := fmt.Sprintf("%s/namespaces/%s/workflows/%s", a.cfg.UIURL, url.PathEscape(a.cfg.Namespace), url.PathEscape(workflowID))
	if runID != "" {
		u += "/" + url.PathEscape(runID) + "/history"
	}
	return u
}
