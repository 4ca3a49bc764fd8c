package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ExplainFleet is the plan of FleetSecrets' query as it ran (EXPLAIN
// ANALYZE), for the benchmark to print.
func (s *Store) ExplainFleet(ctx context.Context, f FleetFilter, page Page) (string, error) {
	sql, args := f.listSQL(page)
	return s.explain(ctx, sql, args)
}

// ExplainSummary is the plan of Summary's query as it ran.
func (s *Store) ExplainSummary(ctx context.Context, f FleetFilter, top int) (string, error) {
	sql, args := f.summarySQL(top)
	var plan string
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'`); err != nil { // as Summary runs it
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "+sql, args...)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		plan = strings.Join(lines, "\n")
		return err
	})
	return plan, err
}

func (s *Store) explain(ctx context.Context, sql string, args []any) (string, error) {
	rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "+sql, args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
