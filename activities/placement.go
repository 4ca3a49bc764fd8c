package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

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
// would inherit that place. A live row whose queue nobody polls is passed
// over (polledOwner): the repository goes to its next owner.
func (a *Activities) PlaceGitWork(ctx context.Context, in workflows.PlaceGitWorkInput) (string, error) {
	live, err := a.Store.LiveWorkers(ctx, in.TaskQueue, a.workerOffline())
	if err != nil {
		return "", AppError(err)
	}
	owner, err := a.polledOwner(ctx, a.placeKey(in), in.TaskQueue, live)
	if err != nil {
		return "", AppError(err)
	}
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

// polledOwner is placement.Owner over the live workers whose own Git queue
// has pollers, asking Temporal about the owner first, then about the next
// one, and so on (most placements ask about one queue, answered from the
// cache). A row alone — written by whoever holds a role that may write
// one, for a worker that is not there — attracts no work: its queue has
// no pollers. Where Temporal will not tell (no right to describe a
// queue), the rows are trusted, and the worker logs it. An error asking is
// Retryable: the placement runs again.
func (a *Activities) polledOwner(ctx context.Context, key, taskQueue string, live []string) (string, error) {
	if a.Pollers == nil {
		return placement.Owner(key, live), nil
	}
	for {
		owner := placement.Owner(key, live)
		if owner == "" {
			return "", nil
		}
		polled, known, err := a.Pollers.Polled(ctx, workflows.WorkerGitQueue(taskQueue, owner))
		if err != nil {
			return "", errclass.Wrap(errclass.Retryable, "pollers unknown", err)
		}
		if !known {
			if a.Log != nil {
				a.Log.Warn("Temporal does not say which queues are polled: placement trusts the workers table as it is",
					zap.String("worker", owner))
			}
			return owner, nil
		}
		if polled {
			return owner, nil
		}
		if a.Log != nil {
			a.Log.Warn("a live worker's queue has no pollers: its repositories go to their next owners",
				zap.String("worker", owner), zap.String("queue", workflows.WorkerGitQueue(taskQueue, owner)))
		}
		live = slices.DeleteFunc(slices.Clone(live), func(id string) bool { return id == owner })
	}
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
