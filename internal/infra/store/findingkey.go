package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// legacyFindingKey names the settings row in which releases before key
// versions generated and kept the findings' key: beside the hashes it
// keys, where a dump of the database gives both (architecture §11).
const legacyFindingKey = "finding_hash_key"

// LegacyFindingKey returns the findings' key an earlier release kept in
// the database, and whether there is one. Nothing reads it to hash: it is
// there to be exported to the workers' key file, then forgotten.
func (s *Store) LegacyFindingKey(ctx context.Context) ([]byte, bool, error) {
	var key []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, legacyFindingKey).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return key, err == nil, err
}

// ForgetLegacyFindingKey deletes the findings' key an earlier release kept
// in the database, if it is key (the one the workers were given: a key
// nobody exported stays); it says whether it deleted it.
func (s *Store) ForgetLegacyFindingKey(ctx context.Context, key []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM settings WHERE name = $1 AND value = $2`, legacyFindingKey, key)
	return tag.RowsAffected() == 1, err
}
