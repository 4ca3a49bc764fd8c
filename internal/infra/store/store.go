package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store wraps a connection pool.
type Store struct {
	pool *pgxpool.Pool
}

// Option tunes Open.
type Option func(url string, cfg *pgxpool.Config)

// MaxConns sizes the pool at n connections, unless the URL sizes it
// itself (pool_max_conns). pgx's default, max(4, CPUs), is too small for
// a worker running twice as many activities as CPUs, each of which may
// hold a connection while the scans hold two.
func MaxConns(n int) Option {
	return func(url string, cfg *pgxpool.Config) {
		if n > 0 && !strings.Contains(url, "pool_max_conns") {
			cfg.MaxConns = int32(n)
		}
	}
}

// Open connects to the database at url.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can quote the URL, password included.
		return nil, errors.New("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	for _, o := range opts {
		o(url, cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	st := &Store{pool: pool}
	if err := st.Connect(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s:%d/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return st, nil
}

// connectPatience bounds how long Connect waits for a server that has no
// connection to spare.
const connectPatience = 30 * time.Second

// Connect makes sure the pool holds a connection, waiting with backoff
// while the server refuses new ones for having too many (SQLSTATE 53300,
// "sorry, too many clients already"): a burst of processes at once, such
// as a hundred starters whose refresh ended together, waits its turn
// instead of failing. A refused connection ran nothing, so waiting is
// always safe.
func (s *Store) Connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, connectPatience)
	defer cancel()
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		conn, err := s.pool.Acquire(ctx)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Release()
		}
		var pg *pgconn.PgError
		if err == nil || !errors.As(err, &pg) || pg.Code != "53300" {
			return err
		}
		// Jittered, so the waiting processes do not come back together.
		t := time.NewTimer(wait/2 + time.Duration(time.Now().UnixNano()%int64(wait/2+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// ReleaseIdle closes the pool's idle connections (one in use closes when
// it is put back): a process about to wait long, as a starter waiting on
// a refresh, holds none of the server's connections meanwhile.
func (s *Store) ReleaseIdle() { s.pool.Reset() }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool for packages that own other tables.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// MigrationResult describes one applied migration.
type MigrationResult struct {
	Version int64
	Source  string
}

// MigrateOptions tune Migrate; the zero value is the defaults.
type MigrateOptions struct {
	// LockTimeout bounds every migration statement's wait for a lock
	// (default 5s): a migration that needs an exclusive lock behind a long
	// transaction gives up instead of making every query of that table
	// queue behind it, and is tried again.
	LockTimeout time.Duration
	// Attempts is how many times Migrate tries when a migration gave up on
	// a lock (default 10); Pause is the first wait between tries (default
	// 2s), doubling up to a minute.
	Attempts int
	Pause    time.Duration
	// OnRetry, if set, hears of each retry before its wait.
	OnRetry func(err error, wait time.Duration)
}

// DefaultLockTimeout is a migration statement's default lock timeout.
const DefaultLockTimeout = 5 * time.Second

// Migrate applies pending migrations with the default options and returns
// those it applied.
func (s *Store) Migrate(ctx context.Context) ([]MigrationResult, error) {
	return s.MigrateWith(ctx, MigrateOptions{})
}

// MigrateWith applies pending migrations and returns those it applied.
// Migrations run one at a time under an advisory lock (several migrators
// may start at once), every statement with a lock timeout; one that gave up
// on a lock is tried again, as is a concurrent index build that was
// interrupted (migrations are written to run again, see doc.go).
func (s *Store) MigrateWith(ctx context.Context, o MigrateOptions) ([]MigrationResult, error) {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Attempts <= 0 {
		o.Attempts = 10
	}
	if o.Pause <= 0 {
		o.Pause = 2 * time.Second
	}
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(o.LockTimeout.Milliseconds(), 10)
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return nil, err
	}
	var out []MigrationResult
	for attempt, pause := 1, o.Pause; ; attempt++ {
		if err := dropInterruptedIndexes(ctx, db); err != nil {
			return out, fmt.Errorf("migrate: %w", err)
		}
		results, err := p.Up(ctx)
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			results = partial.Applied
		}
		for _, r := range results {
			out = append(out, MigrationResult{Version: r.Source.Version, Source: r.Source.Path})
		}
		if err == nil {
			return out, nil
		}
		if !isLockTimeout(err) || attempt >= o.Attempts {
			return out, fmt.Errorf("migrate: %w", err)
		}
		if o.OnRetry != nil {
			o.OnRetry(err, pause)
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Minute)
	}
}

// dropInterruptedIndexes drops the invalid indexes an interrupted CREATE
// INDEX CONCURRENTLY leaves behind (the migration's IF NOT EXISTS would
// otherwise keep them), but not one whose build is running now.
func dropInterruptedIndexes(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT i.indisvalid AND n.nspname = current_schema()
			AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = i.indexrelid)`)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return errors.Join(err, rows.Close())
		}
		names = append(names, name)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, name := range names {
		if _, err := db.ExecContext(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+name); err != nil {
			return fmt.Errorf("drop the invalid index %s an interrupted build left: %w", name, err)
		}
	}
	return nil
}

// isLockTimeout reports PostgreSQL's lock_not_available: a statement gave
// up waiting for a lock.
func isLockTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "55P03"
}

// SchemaVersion is the newest applied migration (0 for an empty database).
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	st, err := s.Schema(ctx)
	return st.Version, err
}

// SchemaStatus is where the database's schema stands against the
// migrations this binary carries.
type SchemaStatus struct {
	// Version is the newest migration applied (0: none).
	Version int64
	// Want is the newest migration this binary carries.
	Want int64
	// Pending are the migrations this binary carries that are not applied.
	Pending []int64
}

// Current reports whether every migration this binary carries is applied.
func (st SchemaStatus) Current() bool { return len(st.Pending) == 0 }

// Schema reads which migrations are applied, without taking the migration
// lock or writing anything: workers ask while `starter migrate` runs.
func (s *Store) Schema(ctx context.Context) (SchemaStatus, error) {
	var st SchemaStatus
	applied := map[int64]bool{}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return st, err
	}
	if exists {
		// A version's newest row says whether it is applied (a down
		// migration adds a row that is not).
		rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (version_id) version_id, is_applied FROM goose_db_version
			WHERE version_id > 0 ORDER BY version_id, id DESC`)
		if err != nil {
			return st, err
		}
		var v int64
		var ok bool
		if _, err := pgx.ForEachRow(rows, []any{&v, &ok}, func() error {
			if ok {
				applied[v] = true
				st.Version = max(st.Version, v)
			}
			return nil
		}); err != nil {
			return st, err
		}
	}
	versions, err := migrationVersions()
	if err != nil {
		return st, err
	}
	for _, v := range versions {
		st.Want = max(st.Want, v)
		if !applied[v] {
			st.Pending = append(st.Pending, v)
		}
	}
	return st, nil
}

// migrationVersions are the versions of the embedded migrations, in order.
func migrationVersions() ([]int64, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// WaitForSchema returns once every migration this binary carries is
// applied (by `starter migrate`), checking every interval; report hears
// of the status whenever it changes and at least every minute while it
// waits, so a worker says what it waits for.
func (s *Store) WaitForSchema(ctx context.Context, every time.Duration, report func(SchemaStatus, error)) error {
	var last string
	var said time.Time
	for {
		st, err := s.Schema(ctx)
		if err == nil && st.Current() {
			return nil
		}
		if now := fmt.Sprint(st, err); now != last || time.Since(said) >= time.Minute {
			last, said = now, time.Now()
			report(st, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

func provider(db *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	// Several migrators may start at once; the session locker serialises
	// them on a PostgreSQL advisory lock.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker))
}

// inTx runs fn in a transaction, retrying the whole transaction a few times
// when PostgreSQL reports a conflict with a concurrent one (unique
// violation, serialization failure, deadlock): fn re-reads everything it
// decides on, so a retry sees the winner's rows.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = pgx.BeginFunc(ctx, s.pool, fn)
		if !isConflict(err) {
			return err
		}
	}
	return fmt.Errorf("gave up after repeated conflicts with concurrent transactions: %w", err)
}

func isConflict(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	switch pg.Code {
	case "23505", "40001", "40P01":
		return true
	}
	return false
}
