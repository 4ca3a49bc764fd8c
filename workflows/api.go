// Package workflows holds gitfleet's Temporal workflows, one per file with
// its input and result types beside it. This file holds what they share:
// the task queue, workflow ids, search attributes and activity options.
package workflows

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
)

// TaskQueue is the task queue of gitfleet's workers.
const TaskQueue = "gitfleet"

// CollectWorkflowID is the id of the Collect run for a requested repository:
// case-folded, so that concurrent requests for one name share one run.
func CollectWorkflowID(r repoid.ID) string { return "collect:" + r.Key() }

// CollectOptions are the options every starter of a Collect uses: the
// repository's workflow id, joining a run already in flight for it.
func CollectOptions(r repoid.ID) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       CollectWorkflowID(r),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    temporal.NewSearchAttributes(SARepository.ValueSet(r.Key())),
	}
}

// Search attributes make collections findable and readable in the Web UI
// and with `temporal workflow list --query`.
var (
	// SARepository is the repository as requested, "host/owner/name".
	SARepository = temporal.NewSearchAttributeKeyKeyword("GitfleetRepository")
	// SACase is the identity case letter (A, B, D, E, F, R).
	SACase = temporal.NewSearchAttributeKeyKeyword("GitfleetCase")
	// SACodebase is the codebase id the collection resolved to.
	SACodebase = temporal.NewSearchAttributeKeyInt64("GitfleetCodebase")
	// SAShard is the shard key a scan runs.
	SAShard = temporal.NewSearchAttributeKeyKeyword("GitfleetShard")
)

// SearchAttributes lists every custom search attribute with its type, for
// registration (EnsureSearchAttributes, or `temporal server start-dev
// --search-attribute`).
var SearchAttributes = map[string]enumspb.IndexedValueType{
	SARepository.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SACase.GetName():       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SACodebase.GetName():   enumspb.INDEXED_VALUE_TYPE_INT,
	SAShard.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// EnsureSearchAttributes registers the missing search attributes in a
// namespace; it is idempotent, so every worker runs it on start.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	svc := c.OperatorService()
	have, err := svc.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range SearchAttributes {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = svc.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}

// Register registers every workflow on a worker.
func Register(w worker.WorkflowRegistry) {
	w.RegisterWorkflow(Collect)
	w.RegisterWorkflow(ResolveIdentity)
	w.RegisterWorkflow(CleanupStale)
	w.RegisterWorkflow(ExecuteShard)
	w.RegisterWorkflow(RecollectionSweep)
}

// retryPolicy retries Retryable errors with backoff and never retries the
// non-retryable classes (DESIGN §2).
func retryPolicy(maxAttempts int32) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		MaximumAttempts:        maxAttempts,
		NonRetryableErrorTypes: errclass.NonRetryable,
	}
}

// Activity option presets. Retryable errors are bounded by
// ScheduleToClose, not by a count: a rate limit may legitimately hold an
// activity back for most of an hour.
var (
	// gitOptions: network-bound Git work that heartbeats while it runs.
	gitOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Minute,
		ScheduleToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            retryPolicy(0),
	}
	// apiOptions: host API requests.
	apiOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 2 * time.Hour,
		RetryPolicy:            retryPolicy(0),
	}
	// dbOptions: short database transactions.
	dbOptions = workflow.ActivityOptions{
		// Short: a task handed to a worker that hangs is retried soon.
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy:            retryPolicy(0),
	}
)

func withOptions(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	return workflow.WithActivityOptions(ctx, o)
}
