package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// CollectOrgWorkflowID is the id of the collection of an organization's
// repositories on behalf of a user.
func CollectOrgWorkflowID(userName, org string) string {
	return "collect-org:" + userName + ":" + strings.ToLower(org)
}

// ProgressQuery returns a CollectOrg run's progress.
const ProgressQuery = "progress"

// CollectOrgInput asks for every repository of an organization, as a user
// sees it in the GitHub cache, to be collected. The cache must hold the
// organization (the starter fills it first).
type CollectOrgInput struct {
	UserID          int64  `json:"userId"`
	Org             string `json:"org"`
	IncludeArchived bool   `json:"includeArchived,omitempty"`
	// Window bounds the starts in flight (default 10).
	Window int `json:"window,omitempty"`
	// After and Progress carry a run's state into the next one.
	After    string             `json:"after,omitempty"`
	Progress CollectOrgProgress `json:"progress"`
}

// CollectOrgProgress is how far a CollectOrg has come, over all its runs.
type CollectOrgProgress struct {
	Listed  int  `json:"listed"`
	Started int  `json:"started"`
	Failed  int  `json:"failed"`
	Done    bool `json:"done"`
	Runs    int  `json:"runs"`
}

func (p CollectOrgProgress) String() string {
	return fmt.Sprintf("%d repositories listed, %d collections started, %d failed to start", p.Listed, p.Started, p.Failed)
}

// orgPagesPerRun bounds a run's history (each start is three events); the
// collection continues as new after it, or sooner when Temporal suggests.
const orgPagesPerRun = 10

// CollectOrg pages through an organization's cached repositories and
// starts a Collect for each, a window at a time. The Collects are the
// ordinary ones: same ids, joined when one is already running.
func CollectOrg(ctx workflow.Context, in CollectOrgInput) (CollectOrgProgress, error) {
	if in.Window <= 0 {
		in.Window = 10
	}
	p := in.Progress
	p.Runs++
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (CollectOrgProgress, error) { return p, nil }); err != nil {
		return p, err
	}
	for pages := 0; ; pages++ {
		if pages == orgPagesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			in.Progress = p
			return p, workflow.NewContinueAsNewError(ctx, CollectOrg, in)
		}
		var page CachedReposPage
		err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityListCachedRepos, ListCachedReposInput{
			UserID: in.UserID, Org: in.Org, IncludeArchived: in.IncludeArchived, After: in.After, Limit: 100,
		}).Get(ctx, &page)
		if err != nil {
			return p, err
		}
		p.Listed += len(page.Repos)
		in.After = page.Next
		for start := 0; start < len(page.Repos); start += in.Window {
			window := page.Repos[start:min(start+in.Window, len(page.Repos))]
			futures := make([]workflow.Future, len(window))
			for i, r := range window {
				futures[i] = workflow.ExecuteActivity(withOptions(ctx, startOptions), activityStartCollect, r)
			}
			for _, f := range futures {
				if err := f.Get(ctx, nil); err != nil {
					p.Failed++
					continue
				}
				p.Started++
			}
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Collecting %s: %s", in.Org, p))
		}
		if page.Done {
			p.Done = true
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Done with %s: %s", in.Org, p))
			return p, nil
		}
	}
}
