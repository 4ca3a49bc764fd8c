package store

import (
	"context"
	"fmt"
	"time"
)

// RegisteredWorkers counts the active workers of the workflows on
// taskQueue heard of within forget, live or not: placement tells a fleet
// that is there but silent (every heartbeat stale at once, after a
// database outage) from no fleet at all (in-process test workers).
func (s *Store) RegisteredWorkers(ctx context.Context, taskQueue string, forget time.Duration) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM workers
		WHERE task_queue = $1 AND state = 'active' AND last_heartbeat >= now() - $2 * interval '1 microsecond'`,
		taskQueue, micros(forget)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("registered workers: %w", err)
	}
	return n, nil
}
