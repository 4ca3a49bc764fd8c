package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"gitfleet/internal/domain/repoid"
)

// StaleCleanupScheduleID is the Temporal Schedule that starts CleanupStale.
const StaleCleanupScheduleID = "stale-cleanup"

// ScheduleConfig says how often the schedules fire.
type ScheduleConfig struct {
	SweepEvery     time.Duration // default 1h
	CleanupEvery   time.Duration // default 24h
	ReconcileEvery time.Duration // default 5m
	// RevalidateEvery: how often every open secret is checked again
	// (default 24h; sends nothing while GITFLEET_VALIDATE is not on).
	RevalidateEvery time.Duration
	// Reconcile tunes the scheduled ReconcileRunners.
	Reconcile ReconcileRunnersInput
	// Sweep tunes the scheduled RecollectionSweep (MaxRunning, Ranges: 0
	// is one range per live worker).
	Sweep RecollectionSweepInput
}

// Schedules are the schedules gitfleet keeps, by id.
func Schedules(cfg ScheduleConfig) map[string]client.ScheduleOptions {
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = time.Hour
	}
	if cfg.CleanupEvery <= 0 {
		cfg.CleanupEvery = 24 * time.Hour
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = 5 * time.Minute
	}
	if cfg.RevalidateEvery <= 0 {
		cfg.RevalidateEvery = 24 * time.Hour
	}
	// Each scheduled sweep takes up the hosts the last one halted where
	// it stopped.
	if cfg.Sweep.Carry == "" {
		cfg.Sweep.Carry = SweepScheduleID
	}
	// Each pass splits the fleet into ranges, one per live worker unless
	// set (a sweep a range: recollection-sweep:3-of-16).
	if cfg.Sweep.Ranges == 0 {
		cfg.Sweep.Ranges = SweepRangesPerWorker
	}
	return map[string]client.ScheduleOptions{
		SecretRevalidationScheduleID: {
			ID:      SecretRevalidationScheduleID,
			Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.RevalidateEvery}}, Jitter: time.Minute},
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Action: &client.ScheduleWorkflowAction{
				ID: SecretRevalidationScheduleID, Workflow: ValidateSecrets, Args: []any{ValidateSecretsInput{Trigger: "schedule"}}, TaskQueue: TaskQueue,
				Memo: map[string]any{"target": "every open secret of a supported kind, checked again with its provider"},
			},
			Note: "gitfleet: check again which found secrets still work (only with GITFLEET_VALIDATE=on)",
		},
		ReconcileScheduleID: {
			ID:      ReconcileScheduleID,
			Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.ReconcileEvery}}},
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Action: &client.ScheduleWorkflowAction{
				ID: ReconcileScheduleID, Workflow: ReconcileRunners, Args: []any{cfg.Reconcile}, TaskQueue: TaskQueue,
				Memo: map[string]any{"target": "every runner's image store and snapshot rows"},
			},
			Note: "gitfleet: compare runners' image stores with the snapshot rows and repair them",
		},
		SweepScheduleID: {
			ID:   SweepScheduleID,
			Spec: client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.SweepEvery}}, Jitter: time.Minute},
			// One sweep at a time: the schedule is the lock (no workflow
			// retry policy either: a failed sweep waits for the next cycle).
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Action: &client.ScheduleWorkflowAction{
				ID: SweepScheduleID, Workflow: RecollectionSweep, Args: []any{cfg.Sweep}, TaskQueue: TaskQueue,
				Memo: map[string]any{"target": "codebases viewed in the last 90 days and due for a refresh"},
			},
			Note: "gitfleet: re-collect the repositories people look at, with adaptive decay",
		},
		DeliveryRecoveryScheduleID: {
			ID:      DeliveryRecoveryScheduleID,
			Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: 10 * time.Minute}}},
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Action: &client.ScheduleWorkflowAction{
				ID: DeliveryRecoveryScheduleID, Workflow: RecoverDeliveries, Args: []any{RecoverDeliveriesInput{}}, TaskQueue: TaskQueue,
				Memo: map[string]any{"target": "the GitHub App's webhook deliveries of the last three days"},
			},
			Note: "gitfleet: redeliver the App's webhook events the receiver did not take",
		},
		StaleCleanupScheduleID: {
			ID:      StaleCleanupScheduleID,
			Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.CleanupEvery}}},
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Action: &client.ScheduleWorkflowAction{
				ID: StaleCleanupScheduleID, Workflow: CleanupStale, Args: []any{CleanupStaleInput{}}, TaskQueue: TaskQueue,
				Memo: map[string]any{"target": "codebases stale for more than 30 days"},
			},
			Note: "gitfleet: delete codebases whose repository has been gone for 30 days",
		},
	}
}

// EnsureSchedules creates the schedules, or brings existing ones back to
// this configuration (spec, action, overlap policy); pausing is left as the
// operator set it. Idempotent: every worker runs it on start.
func EnsureSchedules(ctx context.Context, c client.Client, cfg ScheduleConfig) error {
	for id, opts := range Schedules(cfg) {
		_, err := c.ScheduleClient().Create(ctx, opts)
		if err == nil {
			continue
		}
		if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return fmt.Errorf("create schedule %s: %w", id, err)
		}
		err = c.ScheduleClient().GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				s := in.Description.Schedule
				s.Spec = &opts.Spec
				s.Action = opts.Action
				if s.Policy == nil {
					s.Policy = &client.SchedulePolicies{}
				}
				s.Policy.Overlap = opts.Overlap
				return &client.ScheduleUpdate{Schedule: &s}, nil
			},
		})
		if err != nil {
			return fmt.Errorf("update schedule %s: %w", id, err)
		}
	}
	return nil
}

// StartCollect starts (or joins) a sweep's Collect of a repository.
func StartCollect(ctx context.Context, c client.Client, repo repoid.ID) error {
	_, err := c.ExecuteWorkflow(ctx, CollectOptions(repo), Collect, CollectInput{Repo: repo, Trigger: TriggerSweep})
	return err
}

// PropagateOptions are the options every starter of a snapshot's
// propagation uses.
func PropagateOptions(name string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       PropagateSnapshotWorkflowID(name),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    temporal.NewSearchAttributes(SASnapshot.ValueSet(name)),
		Memo:                     map[string]any{"snapshot": name},
	}
}

// StartPropagation starts a snapshot's propagation, or tells the running
// one to look again (signal-with-start): rows added or reset meanwhile are
// never missed.
func StartPropagation(ctx context.Context, c client.Client, in PropagateSnapshotInput) (client.WorkflowRun, error) {
	return c.SignalWithStartWorkflow(ctx, PropagateSnapshotWorkflowID(in.Name), PropagateSignal, nil,
		PropagateOptions(in.Name), PropagateSnapshot, in)
}
