package workflows

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/sweeprange"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
)

// TaskQueue is the task queue of gitfleet's workers: workflows, and the
// activities that keep them going (database bookkeeping, API requests,
// starts).
const TaskQueue = "gitfleet"

// GitTaskQueue is the queue of the Git work of workflows running on
// taskQueue (gitfleet:git for TaskQueue): mirror syncs, fetches by SHA and
// scans, which take minutes to hours, run there on slots of their own
// (GITFLEET_ACTIVITY_SLOTS), so that a backlog of them never holds up a
// workflow's 30-second bookkeeping (GITFLEET_CONTROL_SLOTS).
func GitTaskQueue(taskQueue string) string { return taskQueue + ":git" }

// gitWork returns ctx with options o for a Git activity, on the Git queue
// of the workflow's own queue. Runs recorded before the split (version
// git-task-queue) kept Git work on the workflow's queue.
func gitWork(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	if workflow.GetVersion(ctx, "git-task-queue", workflow.DefaultVersion, 1) == 1 {
		o.TaskQueue = GitTaskQueue(workflow.GetInfo(ctx).TaskQueueName)
	}
	return withOptions(ctx, o)
}

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
		Memo:                     map[string]any{"repository": r.String()},
	}
}

// ScanWorkflowID is the id of the ExecuteShard run a scan of t starts: what
// it scans (host/path of a URL, the cleaned absolute path of a local
// repository, its last maxScanPath bytes when longer) and a short digest of
// the shard key, so identical requests still share one run and two
// repositories of one base name (every bare mirror "repo") read apart.
// Only the starter computes it: no workflow reads a scan's id, so runs
// started under LegacyScanWorkflowID replay and finish as they are.
func ScanWorkflowID(t target.Target) string {
	what := t.Location
	if t.Local {
		what = filepath.Clean(t.Location)
		if len(what) > maxScanPath {
			// Keep the tail, from a separator: the end of a path is
			// the part that tells repositories apart.
			tail := what[len(what)-maxScanPath:]
			if i := strings.IndexByte(tail, filepath.Separator); i >= 0 {
				tail = tail[i:]
			}
			what = "..." + tail
		}
	} else if u, err := url.Parse(t.Location); err == nil && u.Host != "" {
		what = u.Host + u.Path
	}
	if len(what) > 200 {
		what = what[:200]
	}
	return "scan:" + what + ":" + scanKeyDigest(t)
}

// maxScanPath bounds the path in a local scan's workflow id.
const maxScanPath = 100

// LegacyScanWorkflowID is the id releases before issue 33 gave a scan: a
// local repository by its base name alone. The starter joins a scan still
// running under it instead of starting a second run of the same shard.
func LegacyScanWorkflowID(t target.Target) string {
	if !t.Local {
		return ScanWorkflowID(t)
	}
	what := filepath.Base(t.Location)
	if len(what) > 200 {
		what = what[:200]
	}
	return "scan:" + what + ":" + scanKeyDigest(t)
}

func scanKeyDigest(t target.Target) string {
	key := strings.TrimPrefix(t.Key(), "target:")
	return key[:min(12, len(key))]
}

// ScanOptions are the options of a scan request's ExecuteShard run.
func ScanOptions(t target.Target) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       ScanWorkflowID(t),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    temporal.NewSearchAttributes(SAShard.ValueSet(t.Key())),
		Memo:                     map[string]any{"target": t.Location},
	}
}

// Outcomes, in SAOutcome and the "outcome" memo: how a collection or a
// scan ended. The Web UI shows a workflow that parked a shard as
// Completed; the outcome says what happened.
const (
	OutcomeCollected = "collected"
	OutcomeFailed    = "failed"
	OutcomeParked    = "parked"
	OutcomeDone      = "done"
	OutcomeActive    = "partial" // a scan that stopped at its budget; the next continues
	// OutcomeCancelled: somebody cancelled the collection; nothing was
	// charged to the repository.
	OutcomeCancelled = "cancelled"
)

// setOutcome records how a run ended in SAOutcome and the memo (runs
// recorded before it replay without).
func setOutcome(ctx workflow.Context, outcome, detail string) {
	if version(ctx, "outcome-attributes", 1) == workflow.DefaultVersion {
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAOutcome.ValueSet(outcome))
	memo := map[string]any{"outcome": outcome}
	if detail != "" {
		memo["detail"] = detail
	}
	_ = workflow.UpsertMemo(ctx, memo)
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
	// SASnapshot is the snapshot a propagation or removal is about.
	SASnapshot = temporal.NewSearchAttributeKeyKeyword("GitfleetSnapshot")
	// SAOutcome is how a collection or scan ended (Outcome*).
	SAOutcome = temporal.NewSearchAttributeKeyKeyword("GitfleetOutcome")
)

// SearchAttributes lists every custom search attribute with its type, for
// registration (EnsureSearchAttributes, or `temporal server start-dev
// --search-attribute`).
var SearchAttributes = map[string]enumspb.IndexedValueType{
	SARepository.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SACase.GetName():       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SACodebase.GetName():   enumspb.INDEXED_VALUE_TYPE_INT,
	SAShard.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SASnapshot.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAOutcome.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
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
	w.RegisterWorkflow(RefreshGitHubCache)
	w.RegisterWorkflow(CollectOrg)
	w.RegisterWorkflow(PropagateSnapshot)
	w.RegisterWorkflow(RemoveSnapshot)
	w.RegisterWorkflow(ReconcileRunners)
	w.RegisterWorkflow(ValidateSecrets)
	w.RegisterWorkflow(RecoverDeliveries)
	w.RegisterWorkflow(RecollectAccount)
	w.RegisterWorkflow(UploadCodeScanning)
	w.RegisterWorkflow(NotifySecrets)
}

// The activities, by name: methods of the structs in package activities,
// which the worker registers. Workflows schedule them by these names and
// exchange the payload types below, so this package is the protocol and
// does not depend on how the activities are implemented.
const (
	// Collection (activities.Activities).
	activitySyncMirror           = "SyncMirror"           // repoid.ID → SyncMirrorResult
	activityRecoverDeliveries    = "RecoverDeliveries"    // RecoverDeliveriesInput → RecoverDeliveriesResult
	activityLookupCodebase       = "LookupCodebase"       // repoid.ID → *identity.Codebase
	activityVerifyCommit         = "VerifyCommit"         // VerifyCommitInput → bool
	activityLookupRepository     = "LookupRepository"     // repoid.ID → identity.Repository
	activityApplyIdentity        = "ApplyIdentity"        // ApplyIdentityInput → identity.Outcome
	activityMarkStale            = "MarkStale"            // codebase id
	activityCompleteCollection   = "CompleteCollection"   // CompleteCollectionInput
	activityFailCollection       = "FailCollection"       // FailCollectionInput
	activityResetFailures        = "ResetFailures"        // repoid.ID
	activityDeleteStaleCodebases = "DeleteStaleCodebases" // max age → count
	activityCodebaseShard        = "CodebaseShard"        // codebase id → shard.Spec
	activityExplainRefusal       = "ExplainRefusal"       // repoid.ID → RefusalResult
	activityExplainMissingName   = "ExplainMissingName"   // repoid.ID → RefusalResult
	activityPlaceGitWork         = "PlaceGitWork"         // PlaceGitWorkInput → task queue
	activityScanNeeded           = "ScanNeeded"           // ScanNeededInput → bool
	activityConfirmCodebase      = "ConfirmCodebase"      // ConfirmCodebaseInput → ConfirmCodebaseResult

	// Shard execution (activities.Shards).
	activityEnsureShard     = "EnsureShard"     // shard.Spec → shard id
	activityAcquireShard    = "AcquireShard"    // AcquireShardInput → Claim
	activitySyncShardMirror = "SyncShardMirror" // ShardWork → refs digest
	activityScanShard       = "ScanShard"       // ShardWork → shard.Receipt
	activityCheckpointShard = "CheckpointShard" // CheckpointInput → shard.Status
	activityParkShard       = "ParkShard"       // ParkInput

	// Re-collection sweep (activities.Sweeps).
	activityListDue              = "ListDue"              // SweepPageInput → SweepPage
	activityCheckHeads           = "CheckHeads"           // CheckHeadsRequest → []HeadOutcome
	activityStartCollect         = "StartCollect"         // repoid.ID
	activityStartCollects        = "StartCollects"        // StartCollectsInput → []StartOutcome
	activityRunningCollects      = "RunningCollects"      // → how many Collect runs run now
	activityListAccountCodebases = "ListAccountCodebases" // ListAccountCodebasesInput → CachedReposPage
	activityLoadSweepResume      = "LoadSweepResume"      // carry string → SweepResumeState
	activitySaveSweepResume      = "SaveSweepResume"      // SweepResumeState
	activitySweepRanges          = "SweepRanges"          // fixed int → ranges of a pass

	// The GitHub cache (activities.GitHub).
	activityRefreshGitHubCache = "RefreshGitHubCache" // RefreshGitHubCacheInput → RefreshGitHubCacheResult
	activityListCachedRepos    = "ListCachedRepos"    // ListCachedReposInput → CachedReposPage

	// The daily cleanup (activities.Cleanup).
	activityCleanUpDatabase = "CleanUpDatabase" // CleanupInput → CleanupProgress
)

// ActivityNames lists every activity the workflows schedule, for the
// worker's check that it registers them all.
var ActivityNames = []string{
	activitySyncMirror, activityLookupCodebase, activityVerifyCommit, activityLookupRepository, activityApplyIdentity,
	activityMarkStale, activityCompleteCollection, activityFailCollection, activityResetFailures,
	activityDeleteStaleCodebases, activityCodebaseShard, activityExplainRefusal, activityExplainMissingName, activityPlaceGitWork, activityScanNeeded,
	activityConfirmCodebase,
	activityEnsureShard, activityAcquireShard, activitySyncShardMirror, activityScanShard, activityCheckpointShard,
	activityParkShard,
	activityListDue, activityCheckHeads, activityStartCollect, activityStartCollects, activityRunningCollects,
	activityListAccountCodebases,
	activityLoadSweepResume, activitySaveSweepResume, activitySweepRanges,
	activityRefreshGitHubCache, activityListCachedRepos,
	activityCleanUpDatabase,
	activityRecoverDeliveries,
	activityPrepareNotifications, activitySendNotification,
}

// Payloads of the collection activities.

// SyncMirrorResult is what a mirror sync learned about the remote.
type SyncMirrorResult struct {
	// Cloned is the repository actually cloned: the request after following
	// the host's redirects for renamed or transferred repositories.
	Cloned        repoid.ID `json:"cloned"`
	Head          string    `json:"head,omitempty"`
	DefaultBranch string    `json:"defaultBranch,omitempty"`
	Empty         bool      `json:"empty,omitempty"`
	// StartedAt is when the sync started: a repository created after it
	// is not the one synced (see identity.CheckRace).
	StartedAt time.Time `json:"startedAt,omitzero"`
	// RefsDigest names the branches and tags the sync left in the mirror
	// (mirror.RefsDigest): the scan of the same job reads a mirror that
	// holds them without syncing again, and syncs its own anywhere else.
	RefsDigest string `json:"refsDigest,omitempty"`
	// CodeScanning: the worker uploads to code scanning (its setting),
	// told here so a collection asks nothing more to know it.
	CodeScanning bool `json:"codeScanning,omitempty"`
}

// RefusalResult is what the API said about a name the git host refused
// (identity.ExplainRefusal), and what was done about it.
type RefusalResult struct {
	Refusal identity.Refusal `json:"refusal"`
	// CodebaseID is the codebase known by the name (0: none).
	CodebaseID int64 `json:"codebaseId,omitempty"`
	// StaleSince is since when that codebase is stale (RefusedGone).
	StaleSince time.Time `json:"staleSince,omitzero"`
	// InaccessibleSince is since when gitfleet cannot read that codebase's
	// repository (RefusedInaccessible, RefusedPrivate).
	InaccessibleSince time.Time `json:"inaccessibleSince,omitzero"`
	// MovedTo is where the repository lives now (RefusedMoved).
	MovedTo *repoid.ID `json:"movedTo,omitempty"`
	// Found is, for ExplainMissingName, the repository the API knows where
	// git served the name: the codebase's, found by id, or the one the name
	// holds now; nil when it knows neither (then Refusal says what that
	// means).
	Found *identity.Repository `json:"found,omitempty"`
	// Message says it for people.
	Message string `json:"message"`
}

// VerifyCommitInput names a commit to look for on a remote.
type VerifyCommitInput struct {
	Repo repoid.ID `json:"repository"`
	SHA  string    `json:"sha"`
	// RefsDigest names the refs the collection's sync saw: a mirror that
	// holds them answers without asking the remote.
	RefsDigest string `json:"refsDigest,omitempty"`
}

// ScanNeededInput asks whether a re-collection of a codebase that saw the
// refs RefsDigest names must scan.
type ScanNeededInput struct {
	CodebaseID int64  `json:"codebaseId"`
	RefsDigest string `json:"refsDigest"`
}

// ConfirmCodebaseInput is what a collection's sync saw, for the one-step
// confirmation of a repository whose head is its codebase's last commit.
type ConfirmCodebaseInput struct {
	// Key, WorkflowID and RunID identify the collection, as in
	// ApplyIdentityInput and CompleteCollectionInput.
	Key           string    `json:"key"`
	WorkflowID    string    `json:"workflowId"`
	RunID         string    `json:"runId"`
	Cloned        repoid.ID `json:"cloned"`
	Head          string    `json:"head,omitempty"`
	DefaultBranch string    `json:"defaultBranch,omitempty"`
	RefsDigest    string    `json:"refsDigest,omitempty"`
}

// ConfirmCodebaseResult is how far the confirmation went.
type ConfirmCodebaseResult struct {
	// ByName is the live codebase holding the name (nil: none), as looked
	// up: ResolveIdentity goes on from it when nothing was confirmed.
	ByName *identity.Codebase `json:"byName,omitempty"`
	// Confirmed is the identity applied (case B), or nil.
	Confirmed *ResolveIdentityResult `json:"confirmed,omitempty"`
	// Recorded: the scan was current too, and the collection is recorded.
	Recorded bool `json:"recorded,omitempty"`
}

// ApplyIdentityInput is one collection's observation, to be applied.
type ApplyIdentityInput struct {
	Key        string `json:"key"`
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	identity.Observation
}

// CompleteCollectionInput closes a successful collection.
type CompleteCollectionInput struct {
	Key        string `json:"key"`
	CodebaseID int64  `json:"codebaseId"`
	Commit     string `json:"commit,omitempty"`
	// RefsDigest names the branches and tags the collection synced
	// (SyncMirrorResult.RefsDigest): the sweep's change check compares
	// the remote's listing with it.
	RefsDigest string `json:"refsDigest,omitempty"`
}

// FailCollectionInput closes a failed (or cancelled) collection.
type FailCollectionInput struct {
	Key        string    `json:"key"`
	Repo       repoid.ID `json:"repository"`
	Class      string    `json:"class"`
	Message    string    `json:"message"`
	WorkflowID string    `json:"workflowId"`
	RunID      string    `json:"runId"`
	// Strike: the failure is the repository's own doing (blame.Strikes)
	// and counts toward its failures in a row.
	Strike bool `json:"strike,omitempty"`
	// Cancelled: the collection was cancelled, not failed.
	Cancelled bool `json:"cancelled,omitempty"`
}

// Payloads of the shard activities.

// AcquireShardInput asks for a lease.
type AcquireShardInput struct {
	ShardID int64  `json:"shardId"`
	Owner   string `json:"owner"`
	Rearm   bool   `json:"rearm,omitempty"`
}

// Claim is the outcome of AcquireShard: a lease when the shard is Active.
// (Another owner's live lease is a Retryable error, not a claim.)
type Claim struct {
	Lease      shard.Lease  `json:"lease"`
	Status     shard.Status `json:"status"`
	ParkReason string       `json:"parkReason,omitempty"`
}

// ShardWork is a lease and what it is for.
type ShardWork struct {
	Lease       shard.Lease   `json:"lease"`
	Spec        shard.Spec    `json:"spec"`
	MaxDuration time.Duration `json:"maxDuration,omitempty"`
	// RefsDigest is what this job's mirror sync saw ("": sync first).
	RefsDigest string `json:"refsDigest,omitempty"`
	// TakeOver: the scan was placed again (its owner did not take it in
	// time, see runGit) and takes the shard over with a new fence from its
	// first attempt, so that an attempt still running on the old owner (a
	// paused VM, a partition from Temporal only) can no longer write; it
	// keeps what that attempt made durable in the run's tally.
	TakeOver bool `json:"takeOver,omitempty"`
}

// CheckpointInput advances a shard's frontier to a receipt.
type CheckpointInput struct {
	Lease     shard.Lease `json:"lease"`
	ReceiptID int64       `json:"receiptId"`
}

// ParkInput parks a shard.
type ParkInput struct {
	Lease  shard.Lease `json:"lease"`
	Reason string      `json:"reason"`
}

// Payloads of the sweep activities.

// SweepCursor is where a sweep is: the (last view, id) of the last
// candidate it read.
type SweepCursor struct {
	Viewed time.Time `json:"viewed"`
	ID     int64     `json:"id"`
}

// SweepPageInput asks for the next page of candidates.
type SweepPageInput struct {
	After SweepCursor `json:"after"`
	Limit int         `json:"limit"`
	Now   time.Time   `json:"now"`
	// Newest pages the most recently viewed first ((last view, id)
	// descending; a zero After starts at Now); else the oldest views
	// first.
	Newest bool `json:"newest,omitempty"`
	// Resume: per host (blame.HostKey) or owner (blame.OwnerKey), where the
	// last sweep halted it; a candidate of it at or before that point (in
	// Newest order) is deferred to the next sweep, not due.
	Resume map[string]SweepCursor `json:"resume,omitempty"`
	// SkipHosts are hosts whose breaker halted: none of their candidates
	// is read (a sweep through a host's outage stops reading its pages).
	SkipHosts []string `json:"skipHosts,omitempty"`
	// Range is the sweep's range of the fleet (nil: all of it).
	Range *sweeprange.Range `json:"range,omitempty"`
}

// SweepPage is one page of decisions.
type SweepPage struct {
	// Next is where the next page starts; Done reports the last page.
	Next       SweepCursor `json:"next"`
	Done       bool        `json:"done"`
	Considered int         `json:"considered"`
	Due        []DueRepo   `json:"due,omitempty"`
	// Deferred counts the candidates of the page Resume deferred.
	Deferred int `json:"deferred,omitempty"`
}

// SweepResumeState is what a sweep with a Carry leaves for the next: where
// each host (owner) it halted stopped.
type SweepResumeState struct {
	Carry  string                 `json:"carry"`
	Resume map[string]SweepCursor `json:"resume,omitempty"`
}

// DueRepo is a codebase the sweep found due.
type DueRepo struct {
	CodebaseID int64 `json:"codebaseId"`
	// Viewed is its last view: with CodebaseID, its place in the sweep's
	// order.
	Viewed     time.Time `json:"viewed,omitempty"`
	Repo       repoid.ID `json:"repository"`
	LastCommit string    `json:"lastCommit,omitempty"`
	// RefsDigest names the branches and tags its last collection saw ("":
	// not recorded, so changed).
	RefsDigest string `json:"refsDigest,omitempty"`
	// PolicyCurrent reports that its last scan used the current rules.
	PolicyCurrent bool `json:"policyCurrent,omitempty"`
}

// CheckHeadsInput asks for cheap change checks.
type CheckHeadsInput struct {
	Repos []DueRepo `json:"repos"`
	Now   time.Time `json:"now"`
}

// HeadOutcome is the result of one cheap change check.
type HeadOutcome string

const (
	HeadChanged   HeadOutcome = "changed"
	HeadUnchanged HeadOutcome = "unchanged"
	// HeadFailed: the host's or the infrastructure's failure (an outage, a
	// proxy, TLS, DNS, a timeout, or a refusal shared by many): it counts
	// toward the sweep's circuit breaker, against no repository.
	HeadFailed HeadOutcome = "failed"
	// HeadGone: the host refused the repository while serving others (gone
	// or private): counted as the repository's failure (blame.Checks).
	HeadGone HeadOutcome = "gone"
	// HeadOwnerFailed: the repository's owner refuses gitfleet (an
	// organization enforcing SSO or an IP allow-list: several of its
	// repositories refused alike, and those of its known to be there too):
	// it counts toward the sweep's breaker for that owner, against no
	// repository and not the host. Only for a request with PerOwner (a
	// request without it gets HeadFailed).
	HeadOwnerFailed HeadOutcome = "owner-failed"
	// HeadSkipped: not checked: its host failed StopHostAfter checks in a
	// row in this batch (timeouts, 5xx, DNS, TLS: never a repository's),
	// so the rest of the host's batch was given up. Only for a request
	// with StopHostAfter.
	HeadSkipped HeadOutcome = "skipped"
)

// Payloads of the GitHub cache activities.

// ListCachedReposInput asks for a page of a user's cached repositories of
// an organization, in full-name order after After.
type ListCachedReposInput struct {
	UserID          int64  `json:"userId"`
	Org             string `json:"org"`
	IncludeArchived bool   `json:"includeArchived,omitempty"`
	After           string `json:"after,omitempty"`
	Limit           int    `json:"limit"`
}

// CachedReposPage is one page of repositories to collect.
type CachedReposPage struct {
	Repos []repoid.ID `json:"repos,omitempty"`
	Next  string      `json:"next,omitempty"`
	Done  bool        `json:"done"`
}

// retryPolicy retries Retryable errors with backoff and never retries the
// non-retryable classes (architecture §2).
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
	// cleanupOptions: a round of the cleanup, which works in short steps
	// for its budget (10 minutes) and heartbeats after each; a retry
	// resumes from the last heartbeat.
	cleanupOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    15 * time.Minute,
		ScheduleToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            retryPolicy(0),
	}
)

func withOptions(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	return workflow.WithActivityOptions(ctx, o)
}
