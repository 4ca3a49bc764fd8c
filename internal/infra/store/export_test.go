package store

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5/stdlib"
)

// MigrateTo applies the migrations up to version, for tests of a migration
// on data written before it.
func (s *Store) MigrateTo(ctx context.Context, version int64) error {
	db := stdlib.OpenDBFromPool(s.pool)
	defer func(db *sql.DB) { _ = db.Close() }(db)
	p, err := provider(db)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// The name lookups' queries, for their plans.
const (
	ByNameLiveFirst = byNameLiveFirst
	ByFormerName    = byFormerName
)
