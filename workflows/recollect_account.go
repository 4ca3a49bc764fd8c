package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
)

// RecollectAccountWorkflowID is the id of the re-collection of an
// account's repositories: one per account, so the deliveries about it
// join the run in flight.
func RecollectAccountWorkflowID(host, account string) string {
	return "recollect-account:" + host + "/" + strings.ToLower(account)
}

// RecollectAccountOptions starts an account's re-collection.
func RecollectAccountOptions(host, account string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: RecollectAccountWorkflowID(host, account), TaskQueue: TaskQueue}
}

// AccountChangedSignal is what a webhook delivery about a whole account
// sends its RecollectAccount (SignalWithStart: it starts one when none
// runs): the App's installation deleted, suspended, unsuspended or
// created, or a selection too large to hand over repository by
// repository.
const AccountChangedSignal = "account-changed"

// AccountChanged is AccountChangedSignal's payload: which delivery, for
// the history.
type AccountChanged struct {
	Delivery string `json:"delivery"` // X-GitHub-Delivery
	Event    string `json:"event"`
	Action   string `json:"action,omitempty"`
}

// RecollectAccountInput names the account; the rest carries a run's state
// into the next one.
type RecollectAccountInput struct {
	Host    string `json:"host"`
	Account string `json:"account"`
	// Window, MaxRunning and RunningPoll bound the starts as CollectOrg's
	// do (zero: the same defaults).
	Window      int           `json:"window,omitempty"`
	MaxRunning  int           `json:"maxRunning,omitempty"`
	RunningPoll time.Duration `json:"runningPoll,omitempty"`
	// After is the last name listed; Pending, the names of the page read
	// last not started yet; LastPage, that page was the last.
	After    string      `json:"after,omitempty"`
	Pending  []repoid.ID `json:"pending,omitempty"`
	LastPage bool        `json:"lastPage,omitempty"`
	// Again: a change arrived after this pass began listing, so the
	// account is listed once more after it.
	Again    bool               `json:"again,omitempty"`
	Progress CollectOrgProgress `json:"progress"`
}

// ListAccountCodebasesInput asks for a page of an account's live
// codebases, by name.
type ListAccountCodebasesInput struct {
	Host    string `json:"host"`
	Account string `json:"account"`
	After   string `json:"after,omitempty"` // the last name of the page before
	Limit   int    `json:"limit"`
}

// RecollectAccount collects every live repository gitfleet knows of an
// account once more, so a change that touches all of them at once (the
// App uninstalled or suspended: private repositories become unreadable)
// reaches each through the identity code the sweep uses, within minutes
// instead of at each one's next check. It pages the account's codebases
// and starts their Collects bounded as an organization's collection is
// (at most MaxRunning Collects run fleet-wide); changes that arrive while
// it runs make one more pass after it, however many they are.
func RecollectAccount(ctx workflow.Context, in RecollectAccountInput) (CollectOrgProgress, error) {
	if in.Window <= 0 {
		in.Window = 10
	}
	if in.MaxRunning <= 0 {
		in.MaxRunning = DefaultMaxRunning
	}
	if in.RunningPoll <= 0 {
		in.RunningPoll = DefaultRunningPoll
	}
	p := in.Progress
	p.Runs++
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (CollectOrgProgress, error) { return p, nil }); err != nil {
		return p, err
	}
	changes := workflow.GetSignalChannel(ctx, AccountChangedSignal)
	// The changes that started this run, or met it before its first step,
	// are before its listing.
	if drain(changes) > 0 && in.After != "" {
		in.Again = true // a continued run: they arrived during the pass
	}
	handOver := func() (CollectOrgProgress, error) {
		if drain(changes) > 0 {
			in.Again = true
		}
		in.Progress = p
		return p, workflow.NewContinueAsNewError(ctx, RecollectAccount, in)
	}
	full := func() bool {
		info := workflow.GetInfo(ctx)
		return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= runEventTarget
	}
	what := in.Account + " (" + in.Host + ")"
	starts := roomyStarts{window: in.Window, maxRunning: in.MaxRunning, poll: in.RunningPoll, what: what, p: &p}
	for pages := 0; ; {
		rest, err := starts.drain(ctx, in.Pending, full)
		in.Pending = rest
		if err != nil {
			return p, err
		}
		if len(rest) > 0 {
			return handOver()
		}
		if in.LastPage {
			if drain(changes) > 0 || in.Again {
				// Once more from the first name, for what changed meanwhile.
				in.After, in.LastPage, in.Again = "", false, false
				in.Progress = p
				return p, workflow.NewContinueAsNewError(ctx, RecollectAccount, in)
			}
			p.Done = true
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Done with %s: %s", what, p))
			return p, nil
		}
		if pages == orgPagesPerRun || full() {
			return handOver()
		}
		var page CachedReposPage
		err = workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityListAccountCodebases, ListAccountCodebasesInput{
			Host: in.Host, Account: in.Account, After: in.After, Limit: 100,
		}).Get(ctx, &page)
		if err != nil {
			return p, err
		}
		pages++
		p.Listed += len(page.Repos)
		in.After, in.Pending, in.LastPage = page.Next, page.Repos, page.Done
	}
}
