package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// StaleRetention is how long a stale codebase is kept (and shown as
// "repository no longer exists") before it is deleted with its history.
const StaleRetention = 30 * 24 * time.Hour

// CleanupStaleInput configures a cleanup; zero values mean the defaults.
type CleanupStaleInput struct {
	MaxAge time.Duration `json:"maxAge,omitempty"`
}

// CleanupStaleResult reports the cleanup.
type CleanupStaleResult struct {
	Deleted int64 `json:"deleted"`
}

// CleanupStale hard-deletes codebases stale for longer than the retention.
func CleanupStale(ctx workflow.Context, in CleanupStaleInput) (CleanupStaleResult, error) {
	maxAge := in.MaxAge
	if maxAge <= 0 {
		maxAge = StaleRetention
	}
	var out CleanupStaleResult
	err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityDeleteStaleCodebases, maxAge).Get(ctx, &out.Deleted)
	return out, err
}
