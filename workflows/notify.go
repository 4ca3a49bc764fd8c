package workflows

import (
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Alerts (architecture §8, "Alerts"): a scan that found secrets new to
// the fleet, and a validity check that found secrets valid, start
// NotifySecrets, which sends one message per repository to each receiver
// of GITFLEET_NOTIFY_URL. What travels through Temporal is shard ids,
// message ids, receivers' digests and counts: never a secret, a preview,
// a path or a receiver's URL (the activities read the URLs from their
// configuration).

// The activities of alerts (activities.Notifications).
const (
	activityPrepareNotifications = "PrepareNotifications" // PrepareNotificationsInput → []PreparedMessage
	activitySendNotification     = "SendNotification"     // SendNotificationInput
)

// Alert kinds (notify.Kind).
const (
	NotifyNew   = "new"
	NotifyValid = "valid"
)

// NotifySecretsInput says which secrets to announce.
type NotifySecretsInput struct {
	// Kind: NotifyNew (a scan's new secrets) or NotifyValid (secrets a
	// check found valid).
	Kind string `json:"kind"`
	// Shards: one message per shard (repository) and receiver.
	Shards []int64 `json:"shards"`
	// Since: for NotifyNew, the secrets first seen at or after it (the
	// scan's start, less a margin for clocks): a scan announces what it
	// found, not a repository's past.
	Since time.Time `json:"since,omitzero"`
}

// NotifySecretsResult counts the messages and the secrets they announced.
type NotifySecretsResult struct {
	Messages int `json:"messages"`
	Alerts   int `json:"alerts"`
	// Failed counts messages a receiver refused (a 4xx), or that no
	// attempt delivered within notifyOptions' bound.
	Failed int `json:"failed,omitempty"`
}

// PrepareNotificationsInput asks for the messages of one shard.
type PrepareNotificationsInput struct {
	Kind    string    `json:"kind"`
	ShardID int64     `json:"shardId"`
	Since   time.Time `json:"since,omitzero"`
	// MessagePrefix makes the messages' ids: the same in every attempt
	// of the activity, so a retry finds the messages it wrote.
	MessagePrefix string `json:"messagePrefix"`
}

// PreparedMessage is a message written and ready to send: its id, its
// receiver's digest and how many secrets it announces.
type PreparedMessage struct {
	ID       string `json:"id"`
	Receiver string `json:"receiver"`
	Alerts   int    `json:"alerts"`
}

// SendNotificationInput names a message to send.
type SendNotificationInput struct {
	ID string `json:"id"`
}

// notifyRetry: a receiver down is tried again with backoff, up to a
// minute apart, for notifyOptions' bound: one back after ten minutes gets
// its messages within a minute. The attempts are counted too (about a
// day's at a minute apart), so the SDK's test suite, which caps an
// unbounded count at 10, runs the same policy.
var notifyRetry = retryPolicy(notifyAttempts)

const notifyAttempts = 1500

// notifyOptions: one POST per attempt; a day of attempts.
func notifyOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy:            notifyRetry,
	}
}

// NotifySecrets announces secrets: for each shard, the messages are
// written (PrepareNotifications: each secret claimed for each receiver
// once, in the transaction that writes its message), then each is sent
// with backoff until its receiver takes it. A message whose receiver
// refuses it releases its secrets.
func NotifySecrets(ctx workflow.Context, in NotifySecretsInput) (NotifySecretsResult, error) {
	var out NotifySecretsResult
	// The messages' ids: this run's id (its parent's run id, unique), so
	// that a retried activity finds the messages it wrote.
	prefix := workflow.GetInfo(ctx).WorkflowExecution.ID
	for _, shardID := range in.Shards {
		var msgs []PreparedMessage
		if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityPrepareNotifications, PrepareNotificationsInput{
			Kind: in.Kind, ShardID: shardID, Since: in.Since, MessagePrefix: prefix + ":" + strconv.FormatInt(shardID, 10),
		}).Get(ctx, &msgs); err != nil {
			setOutcome(ctx, OutcomeFailed, message(err))
			return out, err
		}
		running := 0
		for _, m := range msgs {
			running++
			workflow.Go(ctx, func(gctx workflow.Context) {
				defer func() { running-- }()
				err := workflow.ExecuteActivity(withOptions(gctx, notifyOptions()), activitySendNotification, SendNotificationInput{ID: m.ID}).Get(gctx, nil)
				if err != nil {
					workflow.GetLogger(gctx).Warn("An alert was not delivered", "message", m.ID, "receiver", m.Receiver, "error", message(err))
					out.Failed++
					return
				}
				out.Messages++
				out.Alerts += m.Alerts
			})
		}
		if err := workflow.Await(ctx, func() bool { return running == 0 }); err != nil {
			return out, err
		}
	}
	msg := fmt.Sprintf("%s sent, announcing %s", count(out.Messages, "message", "messages"), count(out.Alerts, "secret", "secrets"))
	if out.Failed > 0 {
		msg += fmt.Sprintf("; %d not delivered", out.Failed)
	}
	setOutcome(ctx, OutcomeDone, msg)
	return out, nil
}

// notifyAfterScan: the scans that start NotifySecrets for the secrets
// they found new; notifyValid: the checks that start it for the secrets
// they found valid.
const (
	notifyAfterScan = "notify-after-scan"
	notifyValid     = "notify-valid"
)

// notifyScanMargin widens a scan's window back from its start: the
// database's clock (the secrets' first_at) and Temporal's may differ.
const notifyScanMargin = 10 * time.Minute

// notifyOn is the worker's setting (SetNotify): whether alerts go to
// any receiver.
var notifyOn atomic.Bool

// SetNotify says whether this worker's scans and checks start
// NotifySecrets (the worker sets it when GITFLEET_NOTIFY_URL names a
// receiver). Off, no run is started.
func SetNotify(on bool) { notifyOn.Store(on) }

// notifying reads the setting once into the history (a side effect).
func notifying(ctx workflow.Context) bool {
	var on bool
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return notifyOn.Load() }).Get(&on); err != nil {
		return false
	}
	return on
}

// NotifyWorkflowID is the id of the alerts a run (by its run id, unique)
// starts: of its kind; each run starts at most one. (Not the run's
// workflow id: a replay of a recorded history runs under another.)
func NotifyWorkflowID(kind, parentRunID string) string {
	return "notify:" + kind + ":" + parentRunID
}

// startNotify starts NotifySecrets as a child that outlives its parent
// (abandoned); shardKey, when known, makes it findable by GitfleetShard.
func startNotify(ctx workflow.Context, in NotifySecretsInput, shardKey string) {
	slices.Sort(in.Shards)
	o := workflow.ChildWorkflowOptions{
		WorkflowID:            NotifyWorkflowID(in.Kind, workflow.GetInfo(ctx).WorkflowExecution.RunID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowRunTimeout:    48 * time.Hour,
		Memo:                  map[string]any{"target": fmt.Sprintf("alerts of %s secrets in %s", in.Kind, count(len(in.Shards), "shard", "shards"))},
	}
	if shardKey != "" {
		o.TypedSearchAttributes = temporal.NewSearchAttributes(SAShard.ValueSet(shardKey))
	}
	f := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, o), NotifySecrets, in)
	if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Info("Alerts not started", "kind", in.Kind, "error", message(err))
	}
}
