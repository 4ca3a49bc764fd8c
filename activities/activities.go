package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/liveness"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
)

// Activities are the collection activities.
type Activities struct {
	Store   *store.Store
	Mirrors *mirror.Mirrors
	Hosts   vcs.Hosts
	// Directory returns the API directory of a host; nil means go-github.
	Directory func(vcs.Host) (vcs.Directory, error)
	// Creds reads private repositories: a GitHub App's installation
	// tokens or configured tokens, for the API lookups of identity
	// resolution as for the mirrors' fetches. nil: none.
	Creds *gitcreds.Set
	Log   *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Liveness bounds the silence of a remote during a fetch (zero:
	// liveness's defaults, for gitOptions' one-minute heartbeat timeout).
	Liveness liveness.Bounds
	// WorkerOffline is how long a silent worker keeps its repositories
	// (zero: DefaultWorkerOffline).
	WorkerOffline time.Duration
	// Pollers checks that a live worker's Git queue is polled before
	// placement sends work there (nil: rows are trusted as they are, as in
	// tests that register rows for no worker).
	Pollers *PollerCheck
	// Policy names the scanner's rules (scan.Scanner.Policy): a
	// re-collection whose refs and rules are unchanged skips its scan
	// ("": never skipped).
	Policy string
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// directory is the API directory that answers for owner's repositories:
// the credentials' (an App's installation on owner, a configured token),
// else the host's own (GITHUB_TOKEN, or anonymous). why says why the
// credentials have none for owner ("the GitHub App (id 3) is not installed
// on acme"); via tells that they answer.
func (a *Activities) directory(ctx context.Context, h vcs.Host, owner string) (dir vcs.Directory, why string, via bool, err error) {
	if a.Directory != nil {
		dir, err = a.Directory(h)
		return dir, "", false, err
	}
	if a.Creds.Source(h.Name) != nil {
		dir, why, err = a.Creds.Directory(ctx, h, owner)
		if err != nil || dir != nil {
			return dir, "", dir != nil, err
		}
	}
	dir, err = vcs.NewGitHub(h, nil)
	return dir, why, false, err
}

// AppError converts any error into the ApplicationError of its class. The
// reason goes into the details so workflows can react to it (for example
// "not found") without parsing messages.
func AppError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*temporal.ApplicationError); ok {
		return err
	}
	c := errclass.Classify(err)
	return temporal.NewApplicationErrorWithOptions(err.Error(), string(c.Class), temporal.ApplicationErrorOptions{
		NonRetryable:   c.Class != errclass.Retryable,
		NextRetryDelay: c.RetryAfter,
		Details:        []any{c.Reason},
	})
}

// watch runs a network operation (a fetch, a build) under
// liveness.Watch: the activity heartbeats while the operation moves, and
// stops heartbeating when its remote goes silent, giving the operation up
// (its context cancelled with a liveness.StallError) once the silence
// lasts b.Stall — before the heartbeat timeout, so the retry starts on a
// fresh connection instead of the attempt hanging to its start-to-close.
// Pass the operation's error through stalled.
func watch(ctx context.Context, b liveness.Bounds) (context.Context, func()) {
	return liveness.Watch(ctx, within(ctx, b), func() { activity.RecordHeartbeat(ctx) })
}

// within fits unset bounds to the activity's heartbeat timeout: a beat
// every quarter of it, and a stall given up at three quarters, before
// Temporal gives the attempt up (liveness's defaults, 5 s and 45 s, for a
// timeout of a minute or more).
func within(ctx context.Context, b liveness.Bounds) liveness.Bounds {
	if !activity.IsActivity(ctx) {
		return b
	}
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		if b.Every <= 0 {
			b.Every = min(liveness.DefaultEvery, hb/4)
		}
		if b.Stall <= 0 {
			b.Stall = min(liveness.DefaultStall, hb*3/4)
		}
	}
	return b
}

// stalled returns a Retryable error saying so when the watch of opCtx gave
// the operation up, and err otherwise.
func stalled(opCtx context.Context, err error) error {
	var s *liveness.StallError
	if err != nil && errors.As(context.Cause(opCtx), &s) {
		return errclass.Wrap(errclass.Retryable, ReasonStalled, s)
	}
	return err
}

// ReasonStalled is the reason of an operation given up because its remote
// went silent (see watch).
const ReasonStalled = "remote stalled"

// tick calls fn every interval, in a goroutine, until stop is called, ctx
// ends or fn returns false.
func tick(ctx context.Context, every time.Duration, fn func() bool) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if !fn() {
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

func (a *Activities) logger(ctx context.Context) *zap.Logger { return activityLogger(ctx, a.Log) }

// activityLogger is base (nil: none) with the activity ctx runs, if any,
// and fields.
func activityLogger(ctx context.Context, base *zap.Logger, fields ...zap.Field) *zap.Logger {
	if base == nil {
		base = zap.NewNop()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		fields = append(fields, zap.String("activity", info.ActivityType.Name), zap.String("workflowId", info.WorkflowExecution.ID),
			zap.Int32("attempt", info.Attempt))
	}
	return base.With(fields...)
}
