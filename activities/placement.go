package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gitfleet/internal/domain/placement"
	"gitfleet/internal/infra/errclass"
	"gitfleet/workflows"
)

// DefaultWorkerOffline is how long a worker may stay silent and still own
// repositories (GITFLEET_WORKER_OFFLINE_AFTER): six of its heartbeats.
const DefaultWorkerOffline = time.Minute

// ForgetWorkersAfter: a worker silent this long is no longer counted as
// part of the fleet when none is live (see PlaceGitWork).
const ForgetWorkersAfter = 24 * time.Hour

// PlaceGitWork names the task queue of the worker that owns a
// repository's Git work (placement.Owner over the live workers: active,
// heard of within WorkerOffline by the database's clock), or the shared
// Git queue when no worker has registered (in-process test workers).
// Registered workers none of which is live (every heartbeat stale at once,
// as after a database outage) are a Retryable error: placed now, the work
// would go to any worker and be cloned again there, and its children
// would inherit that place.
func (a *Activities) PlaceGitWork(ctx context.Context, in workflows.PlaceGitWorkInput) (string, error) {
	live, err := a.Store.LiveWorkers(ctx, in.TaskQueue, a.workerOffline())
	if err != nil {
		return "", AppError(err)
	}
	owner := placement.Owner(a.placeKey(in), live)
	if owner == "" {
		n, err := a.Store.RegisteredWorkers(ctx, in.TaskQueue, ForgetWorkersAfter)
		if err != nil {
			return "", AppError(err)
		}
		if n > 0 {
			e := errclass.Wrap(errclass.Retryable, "no live worker",
				fmt.Errorf("none of the %d workers registered for %s has heartbeated within %s: placing when they are back", n, in.TaskQueue, a.workerOffline()))
			e.RetryAfter = a.workerOffline() / 6 // a worker's heartbeat
			return "", AppError(e)
		}
		return workflows.GitTaskQueue(in.TaskQueue), nil
	}
	return workflows.WorkerGitQueue(in.TaskQueue, owner), nil
}

// placeKey names a repository the same way whoever asks: a collection's
// repository by the URL it is cloned from, which is a codebase shard's
// location too, so its collection and its scan land on one worker.
func (a *Activities) placeKey(in workflows.PlaceGitWorkInput) string {
	if in.Repo == nil {
		return placement.URLKey(in.Location)
	}
	if h, err := a.Hosts.Lookup(in.Repo.Host); err == nil {
		return placement.URLKey(h.CloneURL(in.Repo.Owner, in.Repo.Name))
	}
	return strings.ToLower(in.Repo.String())
}

func (a *Activities) workerOffline() time.Duration {
	if a.WorkerOffline > 0 {
		return a.WorkerOffline
	}
	return DefaultWorkerOffline
}
