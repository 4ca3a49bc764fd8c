package snapshot

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// State is a snapshot's lifecycle: pending → pulling|building → active (the
// first runner is ready) or error; removing until every runner let go.
type State string

const (
	Pending  State = "pending"
	Pulling  State = "pulling"
	Building State = "building"
	Active   State = "active"
	Error    State = "error"
	Removing State = "removing"
)

// RowState is the state of one runner's copy of a snapshot.
type RowState string

const (
	RowPulling  RowState = "pulling_snapshot"
	RowBuilding RowState = "building_snapshot"
	RowReady    RowState = "ready"
	RowError    RowState = "error"
	RowRemoving RowState = "removing"
)

// InFlight reports whether a runner is (or should be) working on the row.
func (s RowState) InFlight() bool { return s == RowPulling || s == RowBuilding }

// RunnerState says whether a runner takes new work.
type RunnerState string

const (
	RunnerReady    RunnerState = "ready"
	RunnerDraining RunnerState = "draining" // keeps what it holds, takes no new pulls
	RunnerOffline  RunnerState = "offline"  // stopped heartbeating
)

// Kind says where a snapshot's image comes from.
type Kind string

const (
	KindImage Kind = "image" // pulled from a registry as it is
	KindRepo  Kind = "repo"  // built from a collected repository's commit
)

// Snapshot is a named image that runners hold.
type Snapshot struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// ImageRef is what runners pull: the user's reference for KindImage,
	// the reference the build pushed for KindRepo (empty until built).
	ImageRef string `json:"imageRef,omitempty"`
	// Digest is the manifest digest, known once a runner holds the image;
	// every later pull is by digest.
	Digest string `json:"digest,omitempty"`
	// For KindRepo: the repository, the codebase it resolved to and the
	// commit, and an optional base image.
	Repo       string `json:"repo,omitempty"`
	CodebaseID int64  `json:"codebaseId,omitempty"`
	ExternalID string `json:"externalId,omitempty"`
	Commit     string `json:"commit,omitempty"`
	BaseImage  string `json:"baseImage,omitempty"`

	State       State     `json:"state"`
	ErrorReason string    `json:"errorReason,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// PullRef is the reference to pull: by digest once it is known.
func (s Snapshot) PullRef() string {
	if s.Digest == "" {
		return s.ImageRef
	}
	return Repository(s.ImageRef) + "@" + s.Digest
}

// SameSource reports whether two requests for one name ask for the same
// image, so that a repeated create joins the first instead of failing.
func (s Snapshot) SameSource(o Snapshot) bool {
	return s.Kind == o.Kind && s.BaseImage == o.BaseImage &&
		(s.Kind == KindImage && s.ImageRef == o.ImageRef ||
			s.Kind == KindRepo && s.CodebaseID == o.CodebaseID && s.Commit == o.Commit)
}

// HoldsImage reports whether s is an image snapshot of the image digest of
// ref's repository: one asked for by tag and again by its digest (or by
// another tag of the same image) is the same image. A snapshot whose digest
// is not known yet holds nothing yet.
func (s Snapshot) HoldsImage(ref, digest string) bool {
	return s.Kind == KindImage && digest != "" && s.Digest == digest && Repository(s.ImageRef) == Repository(ref)
}

// Runner is a host that holds snapshots.
type Runner struct {
	ID       string `json:"id"`
	PeerAddr string `json:"peerAddr"`
	// Capacity is how many pulls and builds it runs at once.
	Capacity int `json:"capacity"`
	// QuotaBytes bounds its image store (0: unbounded).
	QuotaBytes    int64       `json:"quotaBytes,omitempty"`
	State         RunnerState `json:"state"`
	LastHeartbeat time.Time   `json:"lastHeartbeat"`
	RegisteredAt  time.Time   `json:"registeredAt"`
}

// Row is one runner's copy of one snapshot (a snapshot_runners row).
type Row struct {
	RunnerID    string   `json:"runnerId"`
	SnapshotRef string   `json:"snapshotRef"`
	State       RowState `json:"state"`
	ErrorReason string   `json:"errorReason,omitempty"`
	BytesDone   int64    `json:"bytesDone"`
	BytesTotal  int64    `json:"bytesTotal"`
	// Source is where the last pull came from: "registry" or "peer:<id>".
	Source string `json:"source,omitempty"`
	// Retries counts automatic retries since the row was last ready.
	Retries   int       `json:"retries"`
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is the last state change (progress does not move it): the
	// pull window is measured from it.
	UpdatedAt time.Time `json:"updatedAt"`
	// Version changes with every write of the row: two reads with one
	// Version saw it unchanged in between.
	Version int64 `json:"version,omitempty"`
}

// ErrInvalid marks malformed names and ids.
var ErrInvalid = errors.New("invalid")

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)
	runnerRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// ValidName checks a snapshot name: lower-case letters, digits, '.', '_'
// and '-', starting with a letter or digit, at most 128 characters. Names
// become index annotations and workflow ids, never paths.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w snapshot name %q: use 1 to 128 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid, name)
	}
	return nil
}

// ValidRunnerID checks a runner id: lower-case letters, digits and '-', at
// most 63 characters, so it is safe in a task queue name, a file name and a
// host label.
func ValidRunnerID(id string) error {
	if !runnerRE.MatchString(id) {
		return fmt.Errorf("%w runner id %q: use 1 to 63 lower-case letters, digits or '-', starting with a letter or digit", ErrInvalid, id)
	}
	return nil
}

// TaskQueue is the task queue a runner polls for pulls and builds.
func TaskQueue(runnerID string) string { return "runner-" + runnerID }

// AdminTaskQueue is the task queue of a runner's short work on its store
// (listings, removals), served by slots of its own: a runner busy with
// pulls still answers it within the queue bound, which then measures the
// runner's liveness, not its load. Runner ids hold no ':', so no runner's
// TaskQueue is another's AdminTaskQueue.
func AdminTaskQueue(runnerID string) string { return "runner-" + runnerID + ":admin" }

// Reasons a row is in error.
const (
	ReasonTimeout = "Timeout while pulling snapshot to runner"
	ReasonOffline = "runner offline"
	// ReasonBuildTimeout: a build used up its own budget (an attempt, or
	// all of them).
	ReasonBuildTimeout = "Timeout while building snapshot on runner"
)

// Transient reports whether a row in error for this reason may succeed on
// its own later (the reconcile retries those with backoff); anything else
// needs a change by someone (a bigger quota, a fixed image) first. A
// failed build's reason is transient as its cause is, but the reconcile
// retries it only so many times (DueForRetry).
func Transient(reason string) bool {
	reason = strings.TrimPrefix(reason, buildPrefix)
	switch reason {
	case ReasonTimeout, ReasonOffline, ReasonBuildTimeout:
		return true
	}
	return strings.HasPrefix(reason, transientPrefix)
}

// buildPrefix marks the reasons of failed builds.
const buildPrefix = "build: "

// BuildFailure is the reason of a build that failed for reason.
func BuildFailure(reason string) string { return buildPrefix + reason }

// IsBuildFailure reports whether a row is in error for a failed build.
func IsBuildFailure(reason string) bool { return strings.HasPrefix(reason, buildPrefix) }

// MaxBuildRetries bounds the reconcile's retries of a failed build since
// the row was last ready: a build costs a fetch of the commit and its
// whole tree, and one that failed this often — most often for its size —
// waits for an operator (`starter snapshot create` again) instead of
// running every hour for ever.
const MaxBuildRetries = 3

// transientPrefix marks reasons of Retryable failures whose retries ran out
// (network, registry 5xx, corrupt transfers).
const transientPrefix = "transient: "

// TransientReason wraps the message of a Retryable failure.
func TransientReason(msg string) string { return transientPrefix + msg }

// RetryAfter is when a row in error may be retried: base doubled per retry
// already made, capped at an hour.
func RetryAfter(r Row, base time.Duration) time.Time {
	d := base
	for i := 0; i < r.Retries && d < time.Hour; i++ {
		d *= 2
	}
	return r.UpdatedAt.Add(min(d, time.Hour))
}

// Repository strips the tag or digest from an image reference
// ("host:5000/a/b:tag" → "host:5000/a/b").
func Repository(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}
