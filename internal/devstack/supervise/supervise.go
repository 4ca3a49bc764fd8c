// Package supervise keeps the dev stack's child processes running: it
// watches each one, restarts it when it exits unexpectedly (a few times,
// with a short backoff), and gives up, saying what died and where its log
// is, when it keeps exiting.
//
// Rules: development tooling, like childproc. Only `starter dev` (build tag
// devstack) and tests import it.
package supervise

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Process is one running instance of a child.
type Process interface {
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// Err is its exit error (nil for exit status 0); valid once Done is
	// closed.
	Err() error
	// Stop stops the process and waits for it to exit.
	Stop() error
}

// StartFunc starts a new instance of a child; the supervisor calls it to
// restart one that exited. It must reuse the child's state (data
// directories, ports).
type StartFunc func(ctx context.Context) (Process, error)

// Options configures a Supervisor.
type Options struct {
	// Restarts is how many times a child is restarted before the
	// supervisor gives up (default 3); negative never restarts.
	Restarts int
	// Backoff is the wait before restart n (1-based); default 500ms·2^(n-1).
	Backoff func(n int) time.Duration
	// ResetAfter: a child that ran this long before exiting has its restart
	// count reset (default 5 minutes): only a child that keeps dying makes
	// the supervisor give up.
	ResetAfter time.Duration
	// Logf receives the restart messages; nil discards them.
	Logf func(format string, args ...any)
	// Restarted, if set, is called with each instance started by a
	// restart, once it is the child's current one.
	Restarted func(name string, p Process)
}

// Supervisor watches children added with Add.
type Supervisor struct {
	opts Options

	failOnce sync.Once
	failed   chan struct{}
	err      error
}

// New returns a Supervisor.
func New(opts Options) *Supervisor {
	if opts.Restarts == 0 {
		opts.Restarts = 3
	}
	if opts.Restarts < 0 {
		opts.Restarts = 0
	}
	if opts.Backoff == nil {
		opts.Backoff = func(n int) time.Duration { return 500 * time.Millisecond << min(n-1, 6) }
	}
	if opts.ResetAfter == 0 {
		opts.ResetAfter = 5 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return &Supervisor{opts: opts, failed: make(chan struct{})}
}

// Failed is closed when the supervisor has given up on a child; Err then
// says which.
func (s *Supervisor) Failed() <-chan struct{} { return s.failed }

// Err is the *GaveUpError of the child the supervisor gave up on, or nil.
func (s *Supervisor) Err() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}

func (s *Supervisor) fail(err error) {
	s.failOnce.Do(func() {
		s.err = err
		close(s.failed)
	})
}

// GaveUpError says which child kept exiting.
type GaveUpError struct {
	Name     string // e.g. "the Temporal dev server"
	Log      string // where its output is
	Restarts int    // restarts tried
	Err      error  // its last exit (or restart) error
}

func (e *GaveUpError) Error() string {
	msg := fmt.Sprintf("%s exited (%s)", e.Name, describe(e.Err))
	if e.Restarts > 0 {
		msg = fmt.Sprintf("%s keeps exiting (%s, after %s)", e.Name, describe(e.Err), plural(e.Restarts, "restart", "restarts"))
	}
	msg += "; stopping everything"
	if e.Log != "" {
		msg += "; its log: " + e.Log
	}
	return msg
}

func (e *GaveUpError) Unwrap() error { return e.Err }

// describe renders an exit error the way exec does ("exit status 3",
// "signal: killed"); nil is a clean exit.
func describe(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Child is a supervised child.
type Child struct {
	s      *Supervisor
	name   string
	log    string
	start  StartFunc
	ctx    context.Context // canceled by Stop: ends a restart in progress
	cancel context.CancelFunc

	mu       sync.Mutex
	cur      Process
	stopped  bool
	stopping chan struct{} // closed by Stop
	watched  chan struct{} // closed when the watching goroutine returns
}

// Add supervises proc, a child already started (so that a failure to start
// it the first time is the caller's to report), named name (for messages,
// e.g. "the Temporal dev server") with its output at log (a path, or a
// description such as "above, on stderr"). start restarts it. The
// supervisor stops watching when ctx is done or Child.Stop is called.
func (s *Supervisor) Add(ctx context.Context, name, log string, proc Process, start StartFunc) *Child {
	ctx, cancel := context.WithCancel(ctx)
	c := &Child{s: s, name: name, log: log, start: start, ctx: ctx, cancel: cancel, cur: proc,
		stopping: make(chan struct{}), watched: make(chan struct{})}
	go c.watch(proc)
	return c
}

// Current is the running instance (the latest one started).
func (c *Child) Current() Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// Stop stops supervising the child and stops its current instance; an exit
// from now on is expected. It waits for a restart in progress to finish
// first, so no instance is left running. Calling it more than once is fine.
func (c *Child) Stop() error {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		close(c.stopping)
	}
	c.mu.Unlock()
	c.cancel()
	<-c.watched
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.Stop()
}

func (c *Child) watch(proc Process) {
	defer close(c.watched)
	restarts := 0 // in a row, since the last instance that lasted ResetAfter
	started := time.Now()
	for {
		select {
		case <-proc.Done():
		case <-c.stopping:
			return
		case <-c.ctx.Done():
			return
		}
		if c.quit() {
			return
		}
		exitErr := proc.Err()
		if time.Since(started) >= c.s.opts.ResetAfter {
			restarts = 0
		}
		var restartErr error
		for {
			if restarts >= c.s.opts.Restarts {
				c.s.fail(&GaveUpError{Name: c.name, Log: c.log, Restarts: restarts, Err: exitErr})
				return
			}
			restarts++
			if restartErr != nil {
				c.s.opts.Logf("%s did not restart (%v); retrying (%d of %d)", c.name, restartErr, restarts, c.s.opts.Restarts)
			} else {
				c.s.opts.Logf("%s exited (%s); restarting (%d of %d)", c.name, describe(exitErr), restarts, c.s.opts.Restarts)
			}
			if d := c.s.opts.Backoff(restarts); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-c.stopping:
					t.Stop()
					return
				case <-c.ctx.Done():
					t.Stop()
					return
				}
			}
			p, err := c.start(c.ctx)
			if err == nil {
				proc = p
				break
			}
			if c.quit() {
				return
			}
			restartErr = err
			exitErr = fmt.Errorf("restart failed: %w", err)
		}
		started = time.Now()
		c.mu.Lock()
		c.cur = proc
		c.mu.Unlock()
		if c.s.opts.Restarted != nil {
			c.s.opts.Restarted(c.name, proc)
		}
	}
}

// quit tells whether the child is no longer supervised (stopped, or the
// context is done).
func (c *Child) quit() bool {
	select {
	case <-c.stopping:
		return true
	case <-c.ctx.Done():
		return true
	default:
		return false
	}
}
