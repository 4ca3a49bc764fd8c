package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/liveness"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/ocibuild"
	"gitfleet/internal/infra/ocistore"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// Runner are the activities a runner runs on its own task queue,
// runner-<id>, against its image store: pulls, builds, removals and the
// inventory the reconcile compares (architecture §7). The worker's activity slots
// are the runner's capacity, so no more pulls run at once than it allows.
type Runner struct {
	ID     string
	Store  *store.Store
	Images *ocistore.Store
	// Hosts and WorkDir serve builds: the commit is fetched from its host
	// into a scratch repository under WorkDir.
	Hosts   vcs.Hosts
	WorkDir string
	// Creds read a private repository's commit for a build (gitcreds: the
	// GitHub App's installation, a configured token); nil: anonymously.
	Creds mirror.Credentials
	// Registry is where builds are pushed: "host[:port]/path", the image
	// named <Registry>/<snapshot>:<commit>. Credentials come from the
	// keychain (docker config, environment), never from workflows.
	Registry string
	// Insecure are registry hosts spoken to over plain HTTP.
	Insecure []string
	// Sources are the registries pulls and base images may come from
	// (architecture §11): the runner pulls with its own credentials, so a
	// snapshot's requester must not name any registry. The zero value
	// allows none.
	Sources snapshot.Sources
	// PeerToken is presented to peers, whose ports require it
	// (ocistore.PeerAccess); it comes from the runner's own environment,
	// never from a workflow.
	PeerToken ocistore.Token
	Log       *zap.Logger
	// ProgressEvery is how often a pull writes its progress to its row
	// (default 500ms).
	ProgressEvery time.Duration
	// Stall is how long a pull waits on a source that sends nothing before
	// it gives the source up (default ocistore.DefaultStall, and never more
	// than half the activity's heartbeat timeout).
	Stall time.Duration
	// Load counts the pulls and builds running; nil counts nothing.
	Load *Load
	// builds are the build directories in use.
	builds buildDirs
}

// Load counts work running at once (a field, not methods of Runner: every
// method of Runner is an activity).
type Load struct{ busy, peak atomic.Int64 }

// Busy is the work running now; Peak the most that ever ran at once.
func (l *Load) Busy() int64 { return l.busy.Load() }
func (l *Load) Peak() int64 { return l.peak.Load() }

// busy is a log field with the work running now and the most that ever
// ran at once (Load), so that a runner's log shows its capacity holding.
func (r *Runner) busy() zap.Field {
	if r.Load == nil {
		return zap.Skip()
	}
	return zap.Dict("load", zap.Int64("busy", r.Load.Busy()), zap.Int64("peak", r.Load.Peak()))
}

func (r *Runner) enter() func() {
	l := r.Load
	if l == nil {
		return func() {}
	}
	n := l.busy.Add(1)
	for {
		p := l.peak.Load()
		if n <= p || l.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return func() { l.busy.Add(-1) }
}

// PullSnapshot pulls a snapshot's image into the store: from the peers it
// was given, then from the image's registry. Blobs the store holds already
// (shared with other snapshots, or kept from an interrupted pull) are not
// fetched again. Progress goes to the activity's heartbeat and to the row
// (for `starter snapshot show`), both off the download's path.
//
// The heartbeat follows progress: bytes received (this pull's, or another
// pull's fetching a blob both need) and sources given up. A source is given
// up once it stalls for half the heartbeat timeout, so that a hung peer is
// left, and that reported, before Temporal gives up on the attempt; and a
// retried attempt leaves out the peers an earlier one gave up (the
// heartbeat's details carry them), starting from the registry.
func (r *Runner) PullSnapshot(ctx context.Context, in workflows.PullInput) (workflows.PullResult, error) {
	defer r.enter()()
	log := r.logger(ctx).With(zap.String("snapshot", in.Snapshot), zap.String("ref", in.Ref))
	ref, err := name.ParseReference(in.Ref, r.nameOptions(in.Ref)...)
	if err != nil {
		return workflows.PullResult{}, AppError(errclass.Permanentf(errclass.ReasonInvalidInput, "image reference %q: %v", in.Ref, err))
	}
	if err := r.allowed("image", ref); err != nil {
		log.Warn("pull refused", zap.Error(err))
		return workflows.PullResult{}, AppError(err)
	}
	var earlier ocistore.Progress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &earlier) // unreadable details: try every peer
	}
	var sources []ocistore.Source
	for _, p := range in.Peers {
		if src := snapshot.PeerSource(p.RunnerID); !slices.Contains(earlier.Skipped, src) {
			sources = append(sources, ocistore.Source{Name: src, Registry: p.Addr, Insecure: true, Anonymous: true, Token: r.PeerToken})
		}
	}
	sources = append(sources, ocistore.Source{Name: snapshot.Registry, Registry: ref.Context().RegistryStr(),
		Insecure: ref.Context().Scheme() == "http"})

	// The attempt's bytes are recorded durably under its name as they
	// arrive: a kill loses at most those since the last progress write.
	info := activity.GetInfo(ctx)
	attempt := store.PullAttempt{RunID: info.WorkflowExecution.RunID, Attempt: fmt.Sprintf("%s/%d", info.ActivityID, info.Attempt),
		RunnerID: r.ID, Snapshot: in.Snapshot}
	rep := r.reportProgress(ctx, in.Snapshot, attempt, earlier, log)
	log.Info("pull started", zap.Int("peers", len(in.Peers)), zap.Strings("skipped", earlier.Skipped), r.busy())
	res, err := r.Images.Pull(ctx, in.Snapshot, in.Ref, sources, ocistore.PullOptions{Progress: rep.set, Stall: r.stall(ctx)})
	rep.stop(ctx)
	if err != nil {
		// What this attempt received, to the last byte, goes with the
		// failure (the SDK sends a failed attempt's last heartbeat) for the
		// next attempt to add to.
		activity.RecordHeartbeat(ctx, rep.take())
		log.Warn("pull failed", zap.Error(err))
		metrics.SnapshotPulls.Inc("failed")
		return workflows.PullResult{}, AppError(err)
	}
	metrics.SnapshotPulls.Inc("ok")
	for src, n := range res.Received {
		metrics.SnapshotPullBytes.Add(n, strings.SplitN(src, ":", 2)[0]) // "registry", "peer"
	}
	// The bytes every attempt made each source send: what a registry sent
	// a pull interrupted and retried counts, not only the last attempt's.
	bySource := addCounts(earlier.Received, res.Received)
	log.Info("pull done", zap.String("digest", res.Digest), zap.Int64("fetched", res.Fetched), zap.Any("bySource", bySource), r.busy())
	return workflows.PullResult{Digest: res.Digest, Size: res.Size, Fetched: res.Fetched, BySource: bySource, Source: mainSource(res.BySource),
		Count: &workflows.PullCount{RunID: attempt.RunID, Attempt: attempt.Attempt, Received: res.Received}}, nil
}

// mainSource is the source that sent the most of what a pull stored (by
// name, on a tie), "" when it stored nothing.
func mainSource(stored map[string]int64) string {
	best := ""
	for src, n := range stored {
		if n > 0 && (best == "" || n > stored[best] || (n == stored[best] && src < best)) {
			best = src
		}
	}
	return best
}

// addCounts sums byte counts by source.
func addCounts(a, b map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(a)+len(b))
	for _, m := range []map[string]int64{a, b} {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// stall is how long a pull waits on a silent source: Stall, at most half
// the activity's heartbeat timeout.
func (r *Runner) stall(ctx context.Context) time.Duration {
	d := r.Stall
	if d <= 0 {
		d = ocistore.DefaultStall
	}
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		d = min(d, hb/2)
	}
	return d
}

// progressReport takes a pull's progress off its download path: the
// stream only leaves its latest report here (set never blocks), and a
// goroutine of its own records it as the activity's heartbeat and writes
// it to the row at most every ProgressEvery. A slow database, or a slow
// Temporal frontend, never holds a byte back; the heartbeat still moves
// only when the stream reports progress.
type progressReport struct {
	mu     sync.Mutex
	latest ocistore.Progress
	// source is the last source that streamed: the row's, kept when the
	// latest report names none.
	source string
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// write writes the latest report to the row, and the attempt's own
	// bytes to its durable count.
	write func(context.Context)
	take  func() ocistore.Progress
}

// reportProgress starts the reporting of one pull; earlier is what earlier
// attempts reported: the sources they gave up and the bytes they received,
// kept in every heartbeat (with this attempt's) for the next attempt.
func (r *Runner) reportProgress(ctx context.Context, snap string, attempt store.PullAttempt, earlier ocistore.Progress, log *zap.Logger) *progressReport {
	every := r.ProgressEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	rep := &progressReport{kick: make(chan struct{}, 1), done: make(chan struct{})}
	ctx, rep.cancel = context.WithCancel(ctx)
	rep.take = func() ocistore.Progress {
		rep.mu.Lock()
		defer rep.mu.Unlock()
		p := rep.latest
		for _, s := range earlier.Skipped {
			if !slices.Contains(p.Skipped, s) {
				p.Skipped = append(p.Skipped, s)
			}
		}
		p.Received = addCounts(earlier.Received, p.Received)
		return p
	}
	rep.write = func(ctx context.Context) {
		rep.mu.Lock()
		source, p := rep.source, rep.latest // latest.Received: this attempt's own
		rep.mu.Unlock()
		// The count first: a row showing progress has its bytes counted.
		if err := r.Store.RecordPullBytes(ctx, attempt, p.Received); err != nil && ctx.Err() == nil {
			log.Debug("bytes received not recorded", zap.Error(err))
		}
		if err := r.Store.SetSnapshotRunnerProgress(ctx, r.ID, snap, p.Done, p.Total, source, time.Now().UTC()); err != nil && ctx.Err() == nil {
			log.Debug("progress not recorded", zap.Error(err))
		}
	}
	take := rep.take
	go func() {
		defer close(rep.done)
		var written time.Time
		var later <-chan time.Time // the next row write, when one waits
		pending := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-rep.kick:
				activity.RecordHeartbeat(ctx, take())
				pending = true
			case <-later:
				later = nil
			}
			if !pending || later != nil {
				continue
			}
			if wait := every - time.Since(written); wait > 0 {
				later = time.After(wait)
				continue
			}
			rep.write(ctx)
			written, pending = time.Now(), false
		}
	}()
	return rep
}

// set leaves the latest progress for the reporter.
func (rep *progressReport) set(p ocistore.Progress) {
	rep.mu.Lock()
	rep.latest = p
	if p.Source != "" {
		rep.source = p.Source
	}
	rep.mu.Unlock()
	select {
	case rep.kick <- struct{}{}:
	default: // the reporter has one to take already
	}
}

// stop ends the reporting (a row write in progress is cancelled) and
// writes the last report to the row, waiting a few seconds at most: the
// download is over, and the row keeps where it came from.
func (rep *progressReport) stop(ctx context.Context) {
	rep.cancel()
	<-rep.done
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rep.write(ctx)
}

// BuildSnapshot builds a snapshot's image from a repository's commit (one
// layer of its tree on the base image), pushes it to the registry and
// keeps it in the store.
//
// A build has its own budget (workflows.PullTiming.BuildAttempt), and a
// retried attempt resumes: the commit is fetched into a directory named
// for the snapshot and commit under WorkDir, kept when the attempt fails
// for a reason a retry may change — a runner restarted on its store keeps
// it too (TidyWorkDir) —, and the push skips the blobs the registry has.
func (r *Runner) BuildSnapshot(ctx context.Context, in workflows.BuildInput) (workflows.BuildResult, error) {
	defer r.enter()()
	work, stop := watch(ctx, liveness.Bounds{})
	defer stop()
	res, err := r.build(work, in)
	return res, AppError(stalled(work, err))
}

func (r *Runner) build(ctx context.Context, in workflows.BuildInput) (res workflows.BuildResult, err error) {
	if r.Registry == "" {
		return res, errclass.Permanentf(errclass.ReasonUnsupported, "runner %s has no registry to push builds to (set GITFLEET_REGISTRY)", r.ID)
	}
	host, err := r.Hosts.Lookup(in.Repo.Host)
	if err != nil {
		return res, errclass.Permanentf(errclass.ReasonInvalidInput, "%v", err)
	}
	if len(in.Commit) < 12 {
		return res, errclass.Permanentf(errclass.ReasonInvalidInput, "%q is not a commit id", in.Commit)
	}
	if in.BaseImage != "" {
		// Before anything is fetched: the runner's credentials go to allowed
		// registries only.
		ref, err := name.ParseReference(in.BaseImage, r.nameOptions(in.BaseImage)...)
		if err != nil {
			return res, errclass.Permanentf(errclass.ReasonInvalidInput, "base image reference %q: %v", in.BaseImage, err)
		}
		if err := r.allowed("base image", ref); err != nil {
			return res, err
		}
	}
	dir, release, err := r.buildDir(in)
	if err != nil {
		return res, err
	}
	defer func() {
		// Done, or failed for good: nothing to resume. A damaged fetch is
		// fetched again.
		c := errclass.Classify(err)
		if err == nil || c.Class != errclass.Retryable || c.Reason == ocibuild.ReasonMissingObject || c.Reason == ocibuild.ReasonCorruptObject {
			os.RemoveAll(dir)
		}
		release()
	}()
	log := r.logger(ctx).With(zap.String("snapshot", in.Snapshot))
	repo, ok, err := fetchForBuild(ctx, host.CloneURL(in.Repo.Owner, in.Repo.Name), in.Commit, filepath.Join(dir, "repo"), r.Creds, log)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, errclass.Permanentf(errclass.ReasonNotFound, "commit %s is not in %s", in.Commit, in.Repo)
	}
	var base v1.Image
	if in.BaseImage != "" {
		if base, err = ocibuild.Base(ctx, in.BaseImage, r.nameOptions(in.BaseImage)...); err != nil {
			return res, err
		}
	}
	layerDir := filepath.Join(dir, "layer")
	img, stats, err := ocibuild.Build(ctx, repo, ocibuild.Source{Repo: in.Repo.String(), ExternalID: in.ExternalID, Commit: in.Commit},
		base, layerDir)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(layerDir) // the spooled layer: a retry builds it again from the fetched commit
	ref := strings.TrimSuffix(r.Registry, "/") + "/" + in.Snapshot + ":" + in.Commit[:12]
	digest, err := ocibuild.Push(ctx, ref, img, r.nameOptions(ref)...)
	if err != nil {
		return res, err
	}
	if _, err := r.Images.Put(ctx, in.Snapshot, img); err != nil {
		return res, err
	}
	size, _ := imageSize(img)
	log.Info("snapshot built", zap.String("ref", ref), zap.String("digest", digest),
		zap.Int("files", stats.Files), zap.Int("submodulesSkipped", stats.SubmodulesSkipped))
	return workflows.BuildResult{ImageRef: ref, Digest: digest, Size: size, Files: stats.Files, SubmodulesSkipped: stats.SubmodulesSkipped}, nil
}

// buildDir is where a build of in works: named for its snapshot and
// commit, so that a retried attempt finds what the last one fetched. An
// attempt still running in this process (one Temporal gave up on, not yet
// ended) keeps it: the new one works in a fresh directory.
func (r *Runner) buildDir(in workflows.BuildInput) (string, func(), error) {
	dir := filepath.Join(r.WorkDir, "build-"+in.Snapshot+"-"+in.Commit[:12])
	if r.builds.take(dir) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			r.builds.give(dir)
			return "", nil, err
		}
		return dir, func() { r.builds.give(dir) }, nil
	}
	tmp, err := os.MkdirTemp(r.WorkDir, "build-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// fetchForBuild opens the repository an earlier attempt fetched commit
// into, or fetches it.
func fetchForBuild(ctx context.Context, url, commit, dir string, creds mirror.Credentials, log *zap.Logger) (*git.Repository, bool, error) {
	if repo, err := git.PlainOpen(dir); err == nil {
		if _, err := repo.CommitObject(plumbing.NewHash(commit)); err == nil {
			log.Info("build resumes from the commit an earlier attempt fetched")
			return repo, true, nil
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, false, err
	}
	return mirror.FetchSnapshotWith(ctx, url, commit, dir, creds)
}

// buildDirs are the build directories in use in this process (the zero
// value is ready to use).
type buildDirs struct {
	mu   sync.Mutex
	used map[string]bool
}

func (b *buildDirs) take(dir string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used[dir] {
		return false
	}
	if b.used == nil {
		b.used = map[string]bool{}
	}
	b.used[dir] = true
	return true
}

func (b *buildDirs) give(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.used, dir)
}

// TidyWorkDir prepares a runner's WorkDir at start: a build directory a
// killed runner left is kept for the build's retry to resume from, unless
// it is older than keep; anything else is removed.
func TidyWorkDir(dir string, keep time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && e.IsDir() && strings.HasPrefix(e.Name(), "build-") && time.Since(info.ModTime()) < keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// ReasonSourceNotAllowed is the reason of a pull or build refused for its
// registry (Sources).
const ReasonSourceNotAllowed = "source not allowed"

// allowed refuses, Permanent, a reference outside the runner's Sources:
// before any request, so that the runner's credentials go nowhere else.
func (r *Runner) allowed(what string, ref name.Reference) error {
	if err := r.Sources.Check(what, ref.Context().RegistryStr(), ref.Context().RepositoryStr()); err != nil {
		return errclass.Permanentf(ReasonSourceNotAllowed, "runner %s: %v", r.ID, err)
	}
	return nil
}

// nameOptions marks a reference to one of the Insecure registries.
func (r *Runner) nameOptions(ref string) []name.Option { return nameOptions(r.Insecure, ref) }

// imageSize is the bytes of an image's manifest, config and layers.
func imageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// RemoveSnapshotImage removes a snapshot's image and the blobs no other
// image uses.
func (r *Runner) RemoveSnapshotImage(ctx context.Context, snap string) error {
	if err := r.Images.Remove(snap); err != nil {
		return AppError(fmt.Errorf("remove image %s: %w", snap, err))
	}
	r.logger(ctx).Info("snapshot image removed", zap.String("snapshot", snap))
	return nil
}

// ListSnapshotImages lists the images the store holds.
func (r *Runner) ListSnapshotImages(ctx context.Context) ([]snapshot.Held, error) {
	images, err := r.Images.Images()
	if err != nil {
		return nil, AppError(err)
	}
	out := make([]snapshot.Held, len(images))
	for i, img := range images {
		out[i] = snapshot.Held{Name: img.Name, Digest: img.Digest}
	}
	return out, nil
}

// ListSnapshotImagesPage lists the images the store holds whose name is
// after in.After (byte order), at most in.Limit, by name.
func (r *Runner) ListSnapshotImagesPage(ctx context.Context, in workflows.PageInput) ([]snapshot.Held, error) {
	images, err := r.Images.Images() // sorted by name
	if err != nil {
		return nil, AppError(err)
	}
	var out []snapshot.Held
	for _, img := range images {
		if img.Name > in.After {
			out = append(out, snapshot.Held{Name: img.Name, Digest: img.Digest})
			if len(out) == in.Limit {
				break
			}
		}
	}
	return out, nil
}

// RegisterRunner registers a runner's activities: every one on its pull
// queue's worker, and its short work on its store (workflows.
// RunnerAdminActivityNames) on its admin queue's as well, whose slots no
// pull or build takes.
func RegisterRunner(pulls, admin worker.ActivityRegistry, r *Runner) {
	pulls.RegisterActivity(r)
	admin.RegisterActivityWithOptions(r.RemoveSnapshotImage, activity.RegisterOptions{Name: "RemoveSnapshotImage"})
	admin.RegisterActivityWithOptions(r.ListSnapshotImages, activity.RegisterOptions{Name: "ListSnapshotImages"})
	admin.RegisterActivityWithOptions(r.ListSnapshotImagesPage, activity.RegisterOptions{Name: "ListSnapshotImagesPage"})
}

func (r *Runner) logger(ctx context.Context) *zap.Logger {
	return activityLogger(ctx, r.Log, zap.String("runner", r.ID))
}
