package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/snapshot"
)

// Snapshot propagation's part of the protocol (architecture §7): the activities
// the snapshot workflows schedule and their payloads. Two structs implement
// them: activities.Snapshots on the gitfleet task queue (the tables) and
// activities.Runner on each runner's own task queue, runner-<id> (its
// image store).
const (
	// The tables (activities.Snapshots).
	activityLoadSnapshot           = "LoadSnapshot"           // name → snapshot.Snapshot
	activityPrepareSnapshotRunners = "PrepareSnapshotRunners" // PrepareRunnersInput → Fleet
	activityTransitionRow          = "TransitionSnapshotRow"  // TransitionRowInput → bool
	activityRecordSnapshotImage    = "RecordSnapshotImage"    // RecordImageInput
	activityActivateSnapshot       = "ActivateSnapshot"       // name → bool
	activitySetSnapshotState       = "SetSnapshotState"       // SetSnapshotStateInput
	activityAbandonSnapshot        = "AbandonSnapshot"        // name
	activityMarkSnapshotRemoving   = "MarkSnapshotRemoving"   // name → []snapshot.Row
	activityDeleteSnapshotRow      = "DeleteSnapshotRow"      // RowKey
	activityFinishSnapshotRemoval  = "FinishSnapshotRemoval"  // name → bool
	activityMarkRunnersOffline     = "MarkRunnersOffline"     // time.Duration → []string
	activityForgetRunners          = "ForgetRunners"          // time.Duration → []string
	activityStartPropagation       = "StartPropagation"       // name
	activityReconcileRunnerIDs     = "ReconcileRunnerIDs"     // PageInput → NamesPage
	activityRunnerRows             = "RunnerRows"             // RunnerRowsInput → RunnerRowsPage
	activityRepullSnapshotRows     = "RepullSnapshotRows"     // RepullInput → []string
	activityRetryDueRows           = "RetryDueRows"           // RetryDueInput → RetryDuePage
	activityUnplacedSnapshots      = "UnplacedSnapshots"      // UnplacedInput → NamesPage
	activityStartPropagations      = "StartPropagations"      // []string
	activityRunnerHeard            = "RunnerHeard"            // RunnerHeardInput → bool
	activityPullBytes              = "PullBytes"              // run id → PullBytes

	// A runner's image store (activities.Runner, task queue runner-<id>).
	activityPullSnapshot        = "PullSnapshot"        // PullInput → PullResult
	activityBuildSnapshot       = "BuildSnapshot"       // BuildInput → BuildResult
	activityRemoveSnapshotImage = "RemoveSnapshotImage" // name
	activityListSnapshotImages  = "ListSnapshotImages"  // → []snapshot.Held (before "reconcile-paged")
	// A runner's admin queue (snapshot.AdminTaskQueue) as well.
	activityListSnapshotImagesPage = "ListSnapshotImagesPage" // PageInput → []snapshot.Held

	// The repository's owner worker (activities.Builds, its Git queue).
	activityBuildSnapshotFromMirror = "BuildSnapshotFromMirror" // BuildInput → BuildResult
)

// SnapshotActivityNames lists the activities on the gitfleet task queue;
// RunnerActivityNames those on runners' queues.
var (
	SnapshotActivityNames = []string{
		activityLoadSnapshot, activityPrepareSnapshotRunners, activityTransitionRow, activityRecordSnapshotImage,
		activityActivateSnapshot, activitySetSnapshotState, activityAbandonSnapshot, activityMarkSnapshotRemoving,
		activityDeleteSnapshotRow, activityFinishSnapshotRemoval, activityMarkRunnersOffline, activityForgetRunners,
		activityStartPropagation, activityReconcileRunnerIDs, activityRunnerRows,
		activityRepullSnapshotRows, activityRetryDueRows, activityUnplacedSnapshots, activityStartPropagations,
		activityRunnerHeard, activityPullBytes,
	}
	RunnerActivityNames = []string{
		activityPullSnapshot, activityBuildSnapshot, activityRemoveSnapshotImage, activityListSnapshotImages,
		activityListSnapshotImagesPage,
	}
	// RunnerAdminActivityNames are the runner's activities also served on
	// its admin queue, with slots of their own.
	RunnerAdminActivityNames = []string{
		activityRemoveSnapshotImage, activityListSnapshotImages, activityListSnapshotImagesPage,
	}
	// BuildActivityNames are the builds on the workers' Git queues.
	BuildActivityNames = []string{activityBuildSnapshotFromMirror}
)

// PrepareRunnersInput asks for the runners a snapshot goes to.
type PrepareRunnersInput struct {
	Snapshot string `json:"snapshot"`
	// Fresh is how recent a runner's heartbeat must be for it to be
	// eligible.
	Fresh time.Duration `json:"fresh"`
}

// Fleet is where a snapshot stands: every eligible runner has a row now.
type Fleet struct {
	// Runners are the eligible runners and those holding the snapshot, by id.
	Runners map[string]snapshot.Runner `json:"runners"`
	// Ready are runners holding it ready (peers to pull from).
	Ready []string `json:"ready,omitempty"`
	// ToPull are the rows waiting for a pull, by runner id (the first
	// builds a snapshot made from a repository).
	ToPull []snapshot.Row `json:"toPull,omitempty"`
	// Rows counts the snapshot's rows in any state.
	Rows int `json:"rows"`
}

// RowKey names one runner's row of one snapshot.
type RowKey struct {
	RunnerID string `json:"runnerId"`
	Snapshot string `json:"snapshot"`
}

// TransitionRowInput moves a row from one of From to To.
type TransitionRowInput struct {
	RowKey
	From   []snapshot.RowState `json:"from,omitempty"`
	To     snapshot.RowState   `json:"to"`
	Reason string              `json:"reason,omitempty"`
	// A pull's outcome, written with its move to ready: the image's bytes
	// and where they came from (empty: the row's stay), and what the
	// attempt received (recorded as the runner records it).
	Size   int64      `json:"size,omitempty"`
	Source string     `json:"source,omitempty"`
	Count  *PullCount `json:"count,omitempty"`
}

// PullCount is what one attempt of a pull made each source send, by
// source name: recorded durably (the runner as bytes arrive, the
// propagation with the attempt's result), keyed by the propagation run
// that scheduled it, whose totals sum every attempt.
type PullCount struct {
	RunID    string           `json:"runId"`
	Attempt  string           `json:"attempt"` // "<activity id>/<attempt>"
	Received map[string]int64 `json:"received,omitempty"`
}

// PullBytes is what a propagation run's pulls made the registry and the
// peers send, every attempt counted.
type PullBytes struct {
	Registry int64 `json:"registry"`
	Peers    int64 `json:"peers"`
}

// RunnerHeardInput asks whether a runner heartbeated within Within (by
// the database's clock).
type RunnerHeardInput struct {
	RunnerID string        `json:"runnerId"`
	Within   time.Duration `json:"within"`
}

// RecordImageInput records what a snapshot's image is once a runner has it.
type RecordImageInput struct {
	Name     string `json:"name"`
	ImageRef string `json:"imageRef"`
	Digest   string `json:"digest"`
}

// SetSnapshotStateInput sets a snapshot's state.
type SetSnapshotStateInput struct {
	Name   string         `json:"name"`
	State  snapshot.State `json:"state"`
	Reason string         `json:"reason,omitempty"`
}

// PageInput asks for up to Limit names after After (byte order).
type PageInput struct {
	After string `json:"after,omitempty"`
	Limit int    `json:"limit"`
}

// NamesPage is a page of names; Done when no more follow.
type NamesPage struct {
	Names []string `json:"names,omitempty"`
	Done  bool     `json:"done"`
}

// RunnerRowsInput asks for a runner's rows whose snapshot name is after
// After and, unless Upto is empty, not after Upto: up to Limit, by name.
type RunnerRowsInput struct {
	RunnerID string `json:"runnerId"`
	After    string `json:"after,omitempty"`
	Upto     string `json:"upto,omitempty"`
	Limit    int    `json:"limit"`
}

// RunnerRowsPage is a range of one runner's rows, with the digests of
// their snapshots by name.
type RunnerRowsPage struct {
	Rows    []snapshot.Row    `json:"rows,omitempty"`
	Digests map[string]string `json:"digests,omitempty"`
}

// RepullInput asks for a runner's ready rows of Snapshots to go back to
// pulling_snapshot (their images are gone).
type RepullInput struct {
	RunnerID  string   `json:"runnerId"`
	Snapshots []string `json:"snapshots"`
}

// RetryDueInput asks to retry the rows in error after After whose backoff
// has passed (snapshot.DueForRetry), looking at up to Limit rows.
type RetryDueInput struct {
	RetryBase time.Duration `json:"retryBase"`
	After     RowKey        `json:"after"`
	Limit     int           `json:"limit"`
}

// RetryDuePage says which snapshots had rows retried among the rows looked
// at, and where the next page starts.
type RetryDuePage struct {
	Retried   int      `json:"retried"`
	Snapshots []string `json:"snapshots,omitempty"`
	Next      RowKey   `json:"next"`
	Done      bool     `json:"done"`
}

// UnplacedInput asks for the snapshots to propagate after After (see
// ReconcileView.Unplaced), up to Limit.
type UnplacedInput struct {
	Fresh time.Duration `json:"fresh"`
	PageInput
}

// PullInput asks a runner to pull a snapshot's image into its store.
type PullInput struct {
	Snapshot string `json:"snapshot"`
	Ref      string `json:"ref"`
	// Peers to try first, in order; the image's own registry comes last.
	Peers []Peer `json:"peers,omitempty"`
}

// Peer is a runner serving its store.
type Peer struct {
	RunnerID string `json:"runnerId"`
	Addr     string `json:"addr"`
}

// PullResult is what a pull did.
type PullResult struct {
	Digest  string `json:"digest"`
	Size    int64  `json:"size"`
	Fetched int64  `json:"fetched"`
	// BySource counts the bytes every attempt received per source
	// ("registry", "peer:<id>"), as far as the heartbeats carried them.
	BySource map[string]int64 `json:"bySource,omitempty"`
	// Source is where this attempt's bytes came from (the source that sent
	// the most of what it stored); empty when it stored nothing.
	Source string `json:"source,omitempty"`
	// Count is what this attempt received, for the durable count.
	Count *PullCount `json:"count,omitempty"`
}

// BuildInput asks the repository's owner worker (before "build-on-owner":
// a runner) to build a snapshot from a collected commit.
type BuildInput struct {
	Snapshot   string    `json:"snapshot"`
	Repo       repoid.ID `json:"repository"`
	ExternalID string    `json:"externalId"`
	Commit     string    `json:"commit"`
	BaseImage  string    `json:"baseImage,omitempty"`
}

// BuildResult is the image a build pushed.
type BuildResult struct {
	ImageRef          string `json:"imageRef"`
	Digest            string `json:"digest"`
	Size              int64  `json:"size"`
	Files             int    `json:"files"`
	SubmodulesSkipped int    `json:"submodulesSkipped,omitempty"`
}

// PullTiming bounds pulls and builds; zero values mean the defaults.
type PullTiming struct {
	// Attempt bounds one pull attempt (default 10m).
	Attempt time.Duration `json:"attempt,omitempty"`
	// Window bounds all attempts, from the row's last state change
	// (default 60m); then the row is in error with snapshot.ReasonTimeout.
	Window time.Duration `json:"window,omitempty"`
	// Queue bounds the wait for the runner to pick a pull up (default 2m);
	// then the row is in error with snapshot.ReasonOffline.
	Queue time.Duration `json:"queue,omitempty"`
	// Heartbeat is how long a pull may go without reporting progress
	// before the attempt is given up (default 10s). A live pull reports
	// well within it: the SDK sends its heartbeat every 0.8 of it while
	// bytes move, and a source silent for half of it is given up and that
	// reported at once (activities.Runner.stall). So a runner killed
	// mid-pull has its pull retried within seconds, not half a minute.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// Fresh is how recent a runner's heartbeat must be for it to get new
	// pulls (default 2m, the reconcile's offline threshold: a runner gets
	// pulls until it is taken offline).
	Fresh time.Duration `json:"fresh,omitempty"`
	// BuildAttempt bounds one build attempt (default 1h): a fetch of the
	// commit and a layer of its whole tree, not a pull.
	BuildAttempt time.Duration `json:"buildAttempt,omitempty"`
	// BuildWindow bounds all attempts of a build (default 3h); a retried
	// attempt resumes from the commit the last one fetched.
	BuildWindow time.Duration `json:"buildWindow,omitempty"`
}

// DefaultPullHeartbeat is a pull's heartbeat timeout unless PullTiming
// says otherwise. Changing it changes no command of a history: a running
// propagation's next pulls take the new bound.
const DefaultPullHeartbeat = 10 * time.Second

func (t PullTiming) withDefaults() PullTiming {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Attempt, 10*time.Minute)
	def(&t.Window, time.Hour)
	def(&t.Queue, 2*time.Minute)
	def(&t.Heartbeat, DefaultPullHeartbeat)
	def(&t.Fresh, 2*time.Minute)
	def(&t.BuildAttempt, time.Hour)
	def(&t.BuildWindow, 3*time.Hour)
	return t
}

// buildOptions are a build's: the runner's queue, its own budget.
func (t PullTiming) buildOptions(runnerID string) workflow.ActivityOptions {
	o := t.runnerOptions(runnerID, t.BuildWindow)
	o.StartToCloseTimeout = t.BuildAttempt
	o.HeartbeatTimeout = t.buildHeartbeat()
	return o
}

// ownerBuildOptions are a build's on the repository's owner worker: its
// own budget; runGit sets the queue and the bound on the wait for the
// owner to take it (then the build is placed again).
func (t PullTiming) ownerBuildOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    t.BuildAttempt,
		ScheduleToCloseTimeout: t.BuildWindow,
		HeartbeatTimeout:       t.buildHeartbeat(),
		RetryPolicy:            retryPolicy(0),
	}
}

// buildHeartbeat is a build's heartbeat timeout: at least 30s, whatever
// the pulls': a build's fetch and push are watched for silence within
// three quarters of it (activities' liveness bounds), and a git remote or
// a registry taking its time is not a dead runner.
func (t PullTiming) buildHeartbeat() time.Duration { return max(t.Heartbeat, 30*time.Second) }

// runnerAdminOptions: short work on a runner's own store (remove, list)
// on its admin queue, whose slots no pull or build takes, so that the
// queue bound is a test of the runner's liveness, not of its load; given
// up when the runner does not pick it up within queue.
func runnerAdminOptions(runnerID string, queue time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              snapshot.AdminTaskQueue(runnerID),
		ScheduleToStartTimeout: queue,
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: queue + 15*time.Minute,
		RetryPolicy:            retryPolicy(5),
	}
}

// runnerOptions are the options of an activity on a runner's queue that
// must finish by deadline (zero: Window from now).
func (t PullTiming) runnerOptions(runnerID string, scheduleToClose time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              snapshot.TaskQueue(runnerID),
		ScheduleToStartTimeout: t.Queue,
		StartToCloseTimeout:    t.Attempt,
		ScheduleToCloseTimeout: scheduleToClose,
		HeartbeatTimeout:       t.Heartbeat,
		RetryPolicy:            retryPolicy(0),
	}
}
