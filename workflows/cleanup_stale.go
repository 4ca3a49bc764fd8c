package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// StaleRetention is how long a stale codebase is kept (and shown as
// "repository no longer exists") before it is deleted with its history.
const StaleRetention = 30 * 24 * time.Hour

// CleanupStaleInput configures a cleanup; zero values mean the defaults.
type CleanupStaleInput struct {
	MaxAge time.Duration `json:"maxAge,omitempty"`
	// Budget is how long each round may work (0: CleanupInput's default).
	Budget time.Duration `json:"budget,omitempty"`
}

// CleanupStaleResult reports the cleanup.
type CleanupStaleResult struct {
	// Deleted counts the stale codebases deleted.
	Deleted int64 `json:"deleted"`
	// Removed is everything the cleanup deleted, retention's included.
	Removed CleanupProgress `json:"removed,omitzero"`
	// Rounds counts the cleanup's activities.
	Rounds int `json:"rounds,omitempty"`
}

// CleanupInput is one round of the cleanup: one activity that works in
// small steps until nothing is left or its budget is spent.
type CleanupInput struct {
	// StaleMaxAge: codebases stale for longer are deleted.
	StaleMaxAge time.Duration `json:"staleMaxAge"`
	// Budget is how long the round may work (0: the default, 10 minutes;
	// its activity's timeout bounds it too).
	Budget time.Duration `json:"budget,omitempty"`
}

// CleanupProgress is what rounds of the cleanup deleted, and whether work
// is left. Rows are the data rows of shards and scopes: watermarks, seen
// blobs, findings, their paths and presence.
type CleanupProgress struct {
	Codebases   int64 `json:"codebases,omitempty"`
	Shards      int64 `json:"shards,omitempty"`
	Scopes      int64 `json:"scopes,omitempty"`
	Collections int64 `json:"collections,omitempty"`
	Receipts    int64 `json:"receipts,omitempty"`
	Rows        int64 `json:"rows,omitempty"`
	More        bool  `json:"more,omitempty"`
}

// Add adds the counts of o to p.
func (p *CleanupProgress) Add(o CleanupProgress) {
	p.Codebases += o.Codebases
	p.Shards += o.Shards
	p.Scopes += o.Scopes
	p.Collections += o.Collections
	p.Receipts += o.Receipts
	p.Rows += o.Rows
}

// maxCleanupRounds bounds one cleanup's history; what is left waits for
// the next day's.
const maxCleanupRounds = 100

// CleanupStale hard-deletes codebases stale for longer than the retention
// and applies the retention of what is no longer current (the worker's
// GITFLEET_RETAIN_* settings), in rounds of small steps (§9).
func CleanupStale(ctx workflow.Context, in CleanupStaleInput) (CleanupStaleResult, error) {
	maxAge := in.MaxAge
	if maxAge <= 0 {
		maxAge = StaleRetention
	}
	var out CleanupStaleResult
	// Runs recorded before: one DELETE in one short activity, which timed
	// out and rolled back at scale.
	if workflow.GetVersion(ctx, "batched-cleanup", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityDeleteStaleCodebases, maxAge).Get(ctx, &out.Deleted)
		return out, err
	}
	actx := withOptions(ctx, cleanupOptions)
	for out.Rounds < maxCleanupRounds {
		out.Rounds++
		var p CleanupProgress
		if err := workflow.ExecuteActivity(actx, activityCleanUpDatabase, CleanupInput{StaleMaxAge: maxAge, Budget: in.Budget}).Get(ctx, &p); err != nil {
			return out, err
		}
		out.Removed.Add(p)
		out.Deleted = out.Removed.Codebases
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Round %d: deleted %d codebases, %d shards, %d scopes, %d collections, %d receipts, %d data rows",
			out.Rounds, out.Removed.Codebases, out.Removed.Shards, out.Removed.Scopes, out.Removed.Collections,
			out.Removed.Receipts, out.Removed.Rows))
		if !p.More {
			return out, nil
		}
	}
	out.Removed.More = true
	return out, nil
}
