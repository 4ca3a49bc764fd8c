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
	activityReconcileView          = "ReconcileView"          // ReconcileViewInput → ReconcileView
	activityStartPropagation       = "StartPropagation"       // name

	// A runner's image store (activities.Runner, task queue runner-<id>).
	activityPullSnapshot        = "PullSnapshot"        // PullInput → PullResult
	activityBuildSnapshot       = "BuildSnapshot"       // BuildInput → BuildResult
	activityRemoveSnapshotImage = "RemoveSnapshotImage" // name
	activityListSnapshotImages  = "ListSnapshotImages"  // → []snapshot.Held
)

// SnapshotActivityNames lists the activities on the gitfleet task queue;
// RunnerActivityNames those on runners' queues.
var (
	SnapshotActivityNames = []string{
		activityLoadSnapshot, activityPrepareSnapshotRunners, activityTransitionRow, activityRecordSnapshotImage,
		activityActivateSnapshot, activitySetSnapshotState, activityAbandonSnapshot, activityMarkSnapshotRemoving,
		activityDeleteSnapshotRow, activityFinishSnapshotRemoval, activityMarkRunnersOffline, activityForgetRunners,
		activityReconcileView, activityStartPropagation,
	}
	RunnerActivityNames = []string{
		activityPullSnapshot, activityBuildSnapshot, activityRemoveSnapshotImage, activityListSnapshotImages,
	}
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

// ReconcileViewInput asks for the runners to reconcile.
type ReconcileViewInput struct {
	Fresh time.Duration `json:"fresh"`
}

// ReconcileView is what the reconcile compares with the runners' stores.
type ReconcileView struct {
	Runners []RunnerRows `json:"runners,omitempty"`
	// Digests are the snapshots' digests by name.
	Digests map[string]string `json:"digests,omitempty"`
	// Errors are the rows in error, for retries.
	Errors []snapshot.Row `json:"errors,omitempty"`
	// Unplaced are the snapshots to propagate: active ones an eligible
	// runner has no row for (a runner that joined since), and those with a
	// row waiting for a pull on an eligible runner (left while it was
	// draining or briefly silent).
	Unplaced []string `json:"unplaced,omitempty"`
}

// RunnerRows is one runner with its rows.
type RunnerRows struct {
	Runner snapshot.Runner `json:"runner"`
	Rows   []snapshot.Row  `json:"rows,omitempty"`
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
	// BySource counts the bytes fetched per source ("registry", "peer:<id>").
	BySource map[string]int64 `json:"bySource,omitempty"`
}

// BuildInput asks a runner to build a snapshot from a collected commit.
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
	// before the attempt is given up (default 30s).
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// Fresh is how recent a runner's heartbeat must be for it to get new
	// pulls (default 2m, the reconcile's offline threshold: a runner gets
	// pulls until it is taken offline).
	Fresh time.Duration `json:"fresh,omitempty"`
}

func (t PullTiming) withDefaults() PullTiming {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Attempt, 10*time.Minute)
	def(&t.Window, time.Hour)
	def(&t.Queue, 2*time.Minute)
	def(&t.Heartbeat, 30*time.Second)
	def(&t.Fresh, 2*time.Minute)
	return t
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
