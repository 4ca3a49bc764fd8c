package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// Cleanup is the daily cleanup's activity: stale codebases and retention.
type Cleanup struct {
	Store *store.Store
	// Retention is what the cleanup lets go of, and after how long.
	Retention store.Retention
	// Batch is the most rows one statement deletes (0: 5,000).
	Batch int
	Log   *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c *Cleanup) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// defaultCleanupBudget is a round's budget when its input gives none.
const defaultCleanupBudget = 10 * time.Minute

// cleanupMargin is the time a round leaves itself before its activity's
// deadline: a step in flight finishes and the result goes back.
const cleanupMargin = 30 * time.Second

// cleanupHeartbeat is a round's progress, so that a retry resumes.
type cleanupHeartbeat struct {
	Cursor store.CleanupCursor       `json:"cursor"`
	Done   workflows.CleanupProgress `json:"done"`
}

// CleanUpDatabase deletes codebases stale for longer than in.StaleMaxAge,
// with everything they hold, and what the retention lets go, in steps of
// one short statement or transaction each (store.CleanupStep), until
// nothing is left (More false) or its budget, bounded by the activity's
// deadline, is spent (More true: the workflow runs another round). It
// heartbeats after every step; a retried attempt resumes where the last
// heartbeat left it.
func (c *Cleanup) CleanUpDatabase(ctx context.Context, in workflows.CleanupInput) (workflows.CleanupProgress, error) {
	budget := in.Budget
	if budget <= 0 {
		budget = defaultCleanupBudget
	}
	stop := time.Now().Add(budget)
	if deadline, ok := ctx.Deadline(); ok && deadline.Add(-cleanupMargin).Before(stop) {
		stop = deadline.Add(-cleanupMargin)
	}
	var hb cleanupHeartbeat
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &hb)
	}
	now := c.now()
	plan := store.CleanupPlan{Now: now, Retention: c.Retention, Batch: c.Batch}
	if in.StaleMaxAge > 0 {
		plan.StaleBefore = now.Add(-in.StaleMaxAge)
	}
	start, steps := time.Now(), 0
	for {
		r, next, done, err := c.Store.CleanupStep(ctx, plan, hb.Cursor)
		if err != nil {
			return hb.Done, AppError(err)
		}
		steps++
		hb.Cursor = next
		hb.Done.Add(workflows.CleanupProgress{Codebases: r.Codebases, Shards: r.Shards, Scopes: r.Scopes,
			Collections: r.Collections, Receipts: r.Receipts, Rows: r.Rows})
		hb.Done.More = !done
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, hb)
		}
		if done || !time.Now().Before(stop) {
			break
		}
	}
	c.logger(ctx).Info("database cleaned up", zap.Bool("more", hb.Done.More), zap.Int("steps", steps),
		zap.Duration("took", time.Since(start)), zap.Int64("codebases", hb.Done.Codebases), zap.Int64("shards", hb.Done.Shards),
		zap.Int64("scopes", hb.Done.Scopes), zap.Int64("collections", hb.Done.Collections),
		zap.Int64("receipts", hb.Done.Receipts), zap.Int64("rows", hb.Done.Rows))
	return hb.Done, nil
}

// deleteStale deletes codebases stale since before cutoff, a hundred per
// transaction, until none is left or the context's deadline is near; it
// leaves their shards' data to CleanUpDatabase.
func deleteStale(ctx context.Context, st *store.Store, cutoff time.Time) (int64, error) {
	var total int64
	for {
		n, err := st.DeleteStale(ctx, cutoff, 100)
		total += n
		if err != nil {
			return total, AppError(err)
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, total)
		}
		deadline, ok := ctx.Deadline()
		if n < 100 || ok && time.Until(deadline) < 5*time.Second {
			return total, nil
		}
	}
}

func (c *Cleanup) logger(ctx context.Context) *zap.Logger {
	return activityLogger(ctx, c.Log)
}
