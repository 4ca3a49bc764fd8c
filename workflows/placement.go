package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
)

// GitPlace says where a repository's Git work runs (architecture §2,
// "Repository affinity"): on the live worker that owns the repository,
// through that worker's own task queue, so that its mirror is cloned once,
// on one worker, and every sync, fetch and scan of it reads that copy. A
// run places its Git work with an activity (the choice is in its history),
// hands the place to its children, and places it again when the owner does
// not take the work within Wait (it died, or was drained).
type GitPlace struct {
	// The repository: a collection's (Repo) or a scan target's URL or path
	// (Location).
	Repo     *repoid.ID `json:"repository,omitempty"`
	Location string     `json:"location,omitempty"`
	// Queue is the owner's task queue ("" until placed).
	Queue string `json:"queue,omitempty"`
	// Wait bounds how long Git work waits for the owner to take it before
	// it is placed again (zero: DefaultPlaceWait).
	Wait time.Duration `json:"wait,omitempty"`
}

// DefaultPlaceWait: a worker that has not taken a task in 5 minutes has
// stopped heartbeating well before (GITFLEET_WORKER_OFFLINE_AFTER), so
// placing again finds the next owner; a busy owner is placed again as
// itself and the work waits on.
const DefaultPlaceWait = 5 * time.Minute

// maxPlacements bounds the placements of one activity: after that it waits
// on its last queue without a bound.
const maxPlacements = 12

// WorkerGitQueue is the task queue of worker's Git work, for workflows on
// taskQueue: gitfleet:git:<worker>.
func WorkerGitQueue(taskQueue, worker string) string { return GitTaskQueue(taskQueue) + ":" + worker }

// PlaceGitWorkInput asks which queue a repository's Git work goes to.
type PlaceGitWorkInput struct {
	Repo     *repoid.ID `json:"repository,omitempty"`
	Location string     `json:"location,omitempty"`
	// TaskQueue is the workflow's: the answer is one of its Git queues.
	TaskQueue string `json:"taskQueue"`
}

// gitFallbackChange: the runs whose Git work with a fallback gives way at
// its own schedule-to-start timeout.
const gitFallbackChange = "git-fallback-gives-way"

// affinityChange: the runs whose Git work goes to the repository's owner
// (before: the shared Git queue, or the workflow's own queue).
const affinityChange = "repository-affinity"

// runGit runs Git activity name with arg on the worker place names,
// placing the work first if it is not placed yet, and again when the owner
// does not take it within the bound.
func runGit(ctx workflow.Context, place *GitPlace, o workflow.ActivityOptions, name string, arg, result any) error {
	return runGitPlaced(ctx, place, o, name, func(bool) any { return arg }, result)
}

// runGitPlaced is runGit with the activity's input made by arg, told
// whether the work is being placed again (after its owner did not take
// it in time).
func runGitPlaced(ctx workflow.Context, place *GitPlace, o workflow.ActivityOptions, name string, arg func(again bool) any, result any) error {
	if version(ctx, affinityChange, 1) == workflow.DefaultVersion {
		return workflow.ExecuteActivity(gitWork(ctx, o), name, arg(false)).Get(ctx, result)
	}
	base := workflow.GetInfo(ctx).TaskQueueName
	// Work with a schedule-to-start bound of its own has a better way
	// than waiting (VerifyCommit: the API answers at once): it gives way at
	// its first timeout, wherever it was placed, instead of being placed
	// again (runs recorded before placed it again, with the placement's
	// bound).
	fallback := o.ScheduleToStartTimeout > 0 && version(ctx, gitFallbackChange, 1) == 1
	for n := 1; ; n++ {
		if place.Queue == "" {
			err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityPlaceGitWork,
				PlaceGitWorkInput{Repo: place.Repo, Location: place.Location, TaskQueue: base}).Get(ctx, &place.Queue)
			if err != nil {
				return err
			}
		}
		ao := o
		ao.TaskQueue = place.Queue
		bounded := place.Queue != GitTaskQueue(base) && n < maxPlacements && !fallback
		if bounded {
			ao.ScheduleToStartTimeout = place.Wait
			if ao.ScheduleToStartTimeout <= 0 {
				ao.ScheduleToStartTimeout = DefaultPlaceWait
			}
		}
		err := workflow.ExecuteActivity(withOptions(ctx, ao), name, arg(n > 1)).Get(ctx, result)
		if err == nil || !bounded || !isScheduleToStart(err) {
			return err
		}
		workflow.GetLogger(ctx).Warn("The repository's worker did not take its Git work; placing it again",
			"queue", place.Queue, "placements", n)
		place.Queue = ""
	}
}
