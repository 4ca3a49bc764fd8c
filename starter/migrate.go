package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"gitfleet/internal/infra/store"
)

func (a *app) migrateCmd() *cobra.Command {
	var lockTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations (workers and runners wait for them)",
		Long: `migrate applies gitfleet's pending database migrations. Run it before the
workers of a new version (the compose job gitfleet-migrate does, and so does
'starter dev'): workers and runners never migrate, they wait until every
migration they carry is applied, serving /livez meanwhile and /readyz once
the schema is current.

Migrations keep tables readable and writable while they run: indexes are
built concurrently, backfills go in committed batches, and no table is
rewritten. A statement that cannot get its lock within --lock-timeout gives
up rather than make every query of its table wait behind it, and is tried
again (10 times, the waits doubling from 2s). Running migrate again after an
interruption finishes the work; it applies nothing when the schema is
current.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			applied, version, err := a.migrate(cmd.Context(), lockTimeout)
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
	cmd.Flags().DurationVar(&lockTimeout, "lock-timeout", store.DefaultLockTimeout, "how long a migration statement waits for a lock before it gives up and is tried again")
	return cmd
}

// migrate applies the pending migrations and returns them with the schema
// version.
func (a *app) migrate(ctx context.Context, lockTimeout time.Duration) ([]store.MigrationResult, int64, error) {
	st, err := a.store(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer st.Close()
	applied, err := st.MigrateWith(ctx, store.MigrateOptions{LockTimeout: lockTimeout,
		OnRetry: func(err error, wait time.Duration) {
			fmt.Fprintf(a.stderr, "a migration gave up waiting for a lock (%v); trying again in %s\n", err, wait)
		}})
	if err != nil {
		return applied, 0, err
	}
	version, err := st.SchemaVersion(ctx)
	return applied, version, err
}
