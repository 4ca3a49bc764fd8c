package workflows

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/infra/errclass"
)

// GitHubCacheRefreshWorkflowID is the id of a user's cache refresh: one per
// user at a time, whoever asks (conflict policy use-existing).
func GitHubCacheRefreshWorkflowID(userName string) string { return "github-cache-refresh:" + userName }

// RefreshGitHubCacheInput names the user whose cached GitHub view to
// refresh. The token is not here: the activity reads it sealed from the
// database and opens it itself.
type RefreshGitHubCacheInput struct {
	UserID int64 `json:"userId"`
	// OnlyIfStale: fetch nothing when every list of the user's cache was
	// refreshed after SeenAt, the latest refresh the caller saw (zero:
	// none). A caller that found the cache cold, or asked for a refresh,
	// is then served by a refresh that ended after it looked: concurrent
	// callers, in any number of processes, make one refresh, even those
	// that come after the first run ended.
	OnlyIfStale bool      `json:"onlyIfStale,omitempty"`
	SeenAt      time.Time `json:"seenAt,omitzero"`
}

// RefreshGitHubCacheResult counts what a refresh did.
type RefreshGitHubCacheResult struct {
	Pages       int `json:"pages"`
	NotModified int `json:"notModified"`
	Orgs        int `json:"orgs"`
	Repos       int `json:"repos"`
	// Skipped: another refresh had done it (OnlyIfStale).
	Skipped bool `json:"skipped,omitempty"`
	// MissingOrgs are organizations asked for by name that GitHub does
	// not know: dropped from the user's cache.
	MissingOrgs []string `json:"missingOrgs,omitempty"`
	// RefusedOrgs are organizations asked for by name that refused the
	// token (SAML single sign-on, an IP allow list): kept as they were.
	RefusedOrgs []string `json:"refusedOrgs,omitempty"`
}

// refreshOptions: a refresh retries GitHub's transient failures a few
// times, waiting out rate limits (NextRetryDelay), then fails and leaves
// the cache as it was. It heartbeats each page: an attempt whose worker
// died is retried within 30 s, and resumes from the pages it saved.
// (Options are not part of what a replay compares: runs in flight take
// them at their next scheduling.)
var refreshOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    5 * time.Minute,
	HeartbeatTimeout:       30 * time.Second,
	ScheduleToCloseTimeout: 90 * time.Minute,
	RetryPolicy:            retryPolicy(5),
}

// RefreshGitHubCache fetches everything a user's GitHub account shows
// (organizations, repositories, and organizations asked for by name), each
// page conditionally, and replaces the user's cached view in one
// transaction (architecture §6).
func RefreshGitHubCache(ctx workflow.Context, in RefreshGitHubCacheInput) (RefreshGitHubCacheResult, error) {
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Refreshing the GitHub cache of user %d", in.UserID))
	var out RefreshGitHubCacheResult
	err := workflow.ExecuteActivity(withOptions(ctx, refreshOptions), activityRefreshGitHubCache, in).Get(ctx, &out)
	if err != nil {
		workflow.SetCurrentDetails(ctx, "Failed; the cache is as it was: "+message(err))
		return out, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Refreshed: %d organizations, %d repositories (%d of %d pages unchanged)",
		out.Orgs, out.Repos, out.NotModified, out.Pages))
	return out, nil
}

// RunGitHubCacheRefresh starts a user's cache refresh, or joins the one
// already running under the user's workflow id, and waits for it.
func RunGitHubCacheRefresh(ctx context.Context, c client.Client, userName string, userID int64) (RefreshGitHubCacheResult, error) {
	return runGitHubCacheRefresh(ctx, c, userName, RefreshGitHubCacheInput{UserID: userID})
}

// JoinGitHubCacheRefresh is RunGitHubCacheRefresh for a caller that saw
// the user's lists last refreshed at seen (zero: never): a refresh that
// ended after that serves it, and this one fetches nothing (OnlyIfStale).
func JoinGitHubCacheRefresh(ctx context.Context, c client.Client, userName string, userID int64, seen time.Time) (RefreshGitHubCacheResult, error) {
	return runGitHubCacheRefresh(ctx, c, userName, RefreshGitHubCacheInput{UserID: userID, OnlyIfStale: true, SeenAt: seen})
}

func runGitHubCacheRefresh(ctx context.Context, c client.Client, userName string, in RefreshGitHubCacheInput) (RefreshGitHubCacheResult, error) {
	var out RefreshGitHubCacheResult
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       GitHubCacheRefreshWorkflowID(userName),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		Memo:                     map[string]any{"user": userName},
	}, RefreshGitHubCache, in)
	if err != nil {
		return out, fmt.Errorf("start the refresh of %s's GitHub cache: %w", userName, err)
	}
	getting, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run.Get(getting, &out) }()
	look := time.NewTicker(rateLimitLook)
	defer look.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return out, fmt.Errorf("refresh of %s's GitHub cache failed: %s", userName, message(err))
			}
			return out, nil
		case <-look.C:
			if until, ok := heldByRateLimit(ctx, c, run); ok && time.Until(until) > rateLimitPatience {
				return out, &RateLimitedError{User: userName, Until: until, WorkflowID: run.GetID()}
			}
		}
	}
}

// rateLimitLook is how often a caller looks whether its refresh waits
// for GitHub's rate limit; rateLimitPatience, the wait worth waiting.
const (
	rateLimitLook     = time.Second
	rateLimitPatience = 15 * time.Second
)

// RateLimitedError is a refresh held by GitHub's rate limit for the
// user's token: it goes on by itself at Until, and the caller does not
// wait for it.
type RateLimitedError struct {
	User       string
	Until      time.Time
	WorkflowID string
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("GitHub's rate limit for %s's token holds the refresh until %s (in %s); it goes on by itself then (workflow %s)",
		e.User, e.Until.Local().Format("15:04:05"), time.Until(e.Until).Round(time.Second), e.WorkflowID)
}

// heldByRateLimit reports whether a refresh's activity waits to be
// retried after GitHub's rate limit, and until when.
func heldByRateLimit(ctx context.Context, c client.Client, run client.WorkflowRun) (time.Time, bool) {
	d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		return time.Time{}, false
	}
	for _, pa := range d.GetPendingActivities() {
		info := pa.GetLastFailure().GetApplicationFailureInfo()
		var reason string
		if info == nil || len(info.GetDetails().GetPayloads()) == 0 || pa.GetNextAttemptScheduleTime() == nil ||
			converter.GetDefaultDataConverter().FromPayloads(info.GetDetails(), &reason) != nil || reason != errclass.ReasonRateLimited {
			continue
		}
		return pa.GetNextAttemptScheduleTime().AsTime(), true
	}
	return time.Time{}, false
}
