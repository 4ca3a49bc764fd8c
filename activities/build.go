package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.uber.org/zap"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/liveness"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/ocibuild"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// Builds build snapshots from repositories on the worker that owns the
// repository (architecture §2, "Repository affinity"; §7): the workflow
// places the build on the owner's Git queue, so the commit is read from
// the mirror its collections keep, and the Git host sees no request when
// the mirror holds it. The image is pushed to Registry, which the runners
// pull from like any image snapshot.
type Builds struct {
	// Worker is this worker's id, for the messages of refused builds.
	Worker  string
	Mirrors *mirror.Mirrors
	Hosts   vcs.Hosts
	// Registry is where builds are pushed: "host[:port]/path", the image
	// named <Registry>/<snapshot>:<commit>. Credentials come from the
	// keychain (docker config, environment), never from workflows.
	Registry string
	// Insecure are registry hosts spoken to over plain HTTP.
	Insecure []string
	// Sources are the registries base images may come from (§11): the
	// worker fetches them with its own credentials, so a snapshot's
	// requester must not name any registry. The zero value allows none.
	Sources snapshot.Sources
	// Liveness bounds the silence of the Git host during a sync (zero:
	// fitted to the activity's heartbeat timeout).
	Liveness liveness.Bounds
	Log      *zap.Logger
}

// BuildSnapshotFromMirror builds a snapshot's image from a repository's
// commit (one layer of its tree on the base image), read from this
// worker's mirror of the repository, and pushes it to the registry. The
// mirror is synced first only when it does not hold the commit, and the
// commit fetched by id only when the sync did not bring it. The tree's
// bounds are ocibuild's and gitread's (depth, object sizes); the hosts a
// sync may reach are the mirrors' (GITFLEET_ALLOWED_HOSTS).
//
// A retried attempt builds again from the mirror, which keeps what the
// last one fetched, and the push skips the blobs the registry has.
func (b *Builds) BuildSnapshotFromMirror(ctx context.Context, in workflows.BuildInput) (workflows.BuildResult, error) {
	work, stop := watch(ctx, b.Liveness)
	defer stop()
	res, err := b.build(work, in)
	return res, AppError(stalled(work, err))
}

func (b *Builds) build(ctx context.Context, in workflows.BuildInput) (res workflows.BuildResult, err error) {
	if b.Registry == "" {
		return res, errclass.Permanentf(errclass.ReasonUnsupported,
			"worker %s has no registry to push builds to (set GITFLEET_REGISTRY on the workers)", b.Worker)
	}
	host, err := b.Hosts.Lookup(in.Repo.Host)
	if err != nil {
		return res, errclass.Permanentf(errclass.ReasonInvalidInput, "%v", err)
	}
	commit := strings.ToLower(in.Commit)
	if !plumbing.IsHash(commit) {
		return res, errclass.Permanentf(errclass.ReasonInvalidInput, "%q is not a commit id", in.Commit)
	}
	if in.BaseImage != "" {
		// Before anything is fetched: the worker's credentials go to
		// allowed registries only.
		ref, err := name.ParseReference(in.BaseImage, nameOptions(b.Insecure, in.BaseImage)...)
		if err != nil {
			return res, errclass.Permanentf(errclass.ReasonInvalidInput, "base image reference %q: %v", in.BaseImage, err)
		}
		if err := b.Sources.Check("base image", ref.Context().RegistryStr(), ref.Context().RepositoryStr()); err != nil {
			return res, errclass.Permanentf(ReasonSourceNotAllowed, "worker %s: %v", b.Worker, err)
		}
	}
	log := b.logger(ctx).With(zap.String("snapshot", in.Snapshot), zap.String("repository", in.Repo.String()))
	start := time.Now()
	repo, url, fetched, err := b.open(ctx, host, in.Repo, commit)
	if err != nil {
		return res, err
	}
	// Marked read while the build reads it (open just used it, which
	// spares it meanwhile): eviction and repacks leave it alone.
	reading, err := b.Mirrors.Reading(ctx, url)
	if err != nil {
		return res, err
	}
	defer reading.Close()
	var base v1.Image
	if in.BaseImage != "" {
		if base, err = ocibuild.Base(ctx, in.BaseImage, nameOptions(b.Insecure, in.BaseImage)...); err != nil {
			return res, err
		}
	}
	spool, err := b.Mirrors.TempDir("build-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(spool)
	img, stats, err := ocibuild.Build(ctx, repo, ocibuild.Source{Repo: in.Repo.String(), ExternalID: in.ExternalID, Commit: commit},
		base, filepath.Join(spool, "layer"))
	if err != nil {
		if r := errclass.Classify(err).Reason; r == ocibuild.ReasonMissingObject || r == ocibuild.ReasonCorruptObject {
			// A damaged mirror: the retry clones it afresh, as a scan's does.
			log.Warn("the mirror is damaged: discarded for the retry to clone again", zap.Error(err))
			if derr := b.Mirrors.Discard(ctx, url); derr != nil {
				log.Warn("damaged mirror not discarded", zap.Error(derr))
			}
		}
		return res, err
	}
	ref := strings.TrimSuffix(b.Registry, "/") + "/" + in.Snapshot + ":" + commit[:12]
	digest, err := ocibuild.Push(ctx, ref, img, nameOptions(b.Insecure, ref)...)
	if err != nil {
		return res, err
	}
	size, _ := imageSize(img)
	log.Info("snapshot built from the mirror", zap.String("ref", ref), zap.String("digest", digest),
		zap.String("fetched", fetched), zap.Int("files", stats.Files), zap.Int("submodulesSkipped", stats.SubmodulesSkipped),
		zap.Duration("took", time.Since(start)))
	return workflows.BuildResult{ImageRef: ref, Digest: digest, Size: size, Files: stats.Files, SubmodulesSkipped: stats.SubmodulesSkipped}, nil
}

// open opens the mirror that holds commit: as it is when it does (no
// request to the Git host), else after a sync, else after fetching the
// commit by id into it (a commit no branch or tag reaches, pinned under
// its synthetic ref). It returns the URL the mirror is kept under, and
// what was fetched ("nothing", "sync", "commit").
func (b *Builds) open(ctx context.Context, host vcs.Host, want repoid.ID, commit string) (_ *git.Repository, at, fetched string, err error) {
	url := host.CloneURL(want.Owner, want.Name)
	fetched = "nothing"
	if !b.Mirrors.HoldsCommit(url, commit) {
		remote, err := b.Mirrors.Sync(ctx, url)
		if err != nil {
			return nil, "", "", boundUnreachable(ctx, nil, err)
		}
		if remote.URL != url {
			// Renamed or moved: the host says where, and the mirror is
			// kept under the URL it answers at.
			if _, err := host.RepositoryAt(remote.URL); err != nil {
				return nil, "", "", errclass.Permanentf(errclass.ReasonUnsupported, "%s redirected somewhere gitfleet cannot follow: %v", want, err)
			}
			url = remote.URL
		}
		fetched = "sync"
		if !b.Mirrors.HoldsCommit(url, commit) {
			ok, err := b.Mirrors.FetchCommit(ctx, url, commit, target.SyntheticRef(commit))
			if err != nil {
				return nil, "", "", boundUnreachable(ctx, nil, err)
			}
			if !ok {
				return nil, "", "", errclass.Permanentf(errclass.ReasonNotFound, "commit %s is not in %s", commit, want)
			}
			fetched = "commit"
		}
	}
	repo, err := b.Mirrors.Open(url)
	if err != nil {
		return nil, "", "", err
	}
	return repo, url, fetched, nil
}

func (b *Builds) logger(ctx context.Context) *zap.Logger {
	return activityLogger(ctx, b.Log, zap.String("worker", b.Worker))
}

// nameOptions marks a reference to one of the insecure registries.
func nameOptions(insecure []string, ref string) []name.Option {
	host, _, _ := strings.Cut(ref, "/")
	for _, h := range insecure {
		if h == host {
			return []name.Option{name.Insecure}
		}
	}
	return nil
}
