package workflows

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
)

// GitHubCacheRefreshWorkflowID is the id of a user's cache refresh: one per
// user at a time, whoever asks (conflict policy use-existing).
func GitHubCacheRefreshWorkflowID(userName string) string { return "github-cache-refresh:" + userName }

// RefreshGitHubCacheInput names the user whose cached GitHub view to
// refresh. The token is not here: the activity reads it sealed from the
// database and opens it itself.
type RefreshGitHubCacheInput struct {
	UserID int64 `json:"userId"`
}

// RefreshGitHubCacheResult counts what a refresh did.
type RefreshGitHubCacheResult struct {
	Pages       int `json:"pages"`
	NotModified int `json:"notModified"`
	Orgs        int `json:"orgs"`
	Repos       int `json:"repos"`
}

// refreshOptions: a refresh retries GitHub's transient failures a few
// times, waiting out rate limits (NextRetryDelay), then fails and leaves
// the cache as it was.
var refreshOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    5 * time.Minute,
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
	var out RefreshGitHubCacheResult
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       GitHubCacheRefreshWorkflowID(userName),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		Memo:                     map[string]any{"user": userName},
	}, RefreshGitHubCache, RefreshGitHubCacheInput{UserID: userID})
	if err != nil {
		return out, fmt.Errorf("start the refresh of %s's GitHub cache: %w", userName, err)
	}
	if err := run.Get(ctx, &out); err != nil {
		return out, fmt.Errorf("refresh of %s's GitHub cache failed: %s", userName, message(err))
	}
	return out, nil
}
