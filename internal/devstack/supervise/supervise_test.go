package supervise

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gitfleet/internal/devstack/childproc"
)

// proc adapts a childproc.Process to Process.
type proc struct{ *childproc.Process }

func (p proc) Stop() error {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.Done()
	return nil
}

func (p proc) kill() { _ = p.Cmd.Process.Signal(syscall.SIGKILL) }

func start(t *testing.T, name string, args ...string) proc {
	t.Helper()
	p, err := childproc.Start(exec.Command(name, args...), syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	return proc{p}
}

// starter returns a StartFunc running name args and counting its calls.
func starter(t *testing.T, n *atomic.Int32, name string, args ...string) StartFunc {
	return func(context.Context) (Process, error) {
		n.Add(1)
		return start(t, name, args...), nil
	}
}

// events collects the supervisor's messages and restarted instances.
type events struct {
	msgs      chan string
	restarted chan Process
}

func newEvents(o Options) (*events, Options) {
	// Buffered and never blocking, so a test that stops reading (one
	// whose child is restarted endlessly) cannot block the watcher.
	e := &events{msgs: make(chan string, 1000), restarted: make(chan Process, 1000)}
	o.Logf = func(format string, args ...any) {
		select {
		case e.msgs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	o.Restarted = func(_ string, p Process) {
		select {
		case e.restarted <- p:
		default:
		}
	}
	o.Backoff = func(int) time.Duration { return 0 }
	return e, o
}

func (e *events) none(t *testing.T) {
	t.Helper()
	select {
	case m := <-e.msgs:
		t.Errorf("unexpected message: %q", m)
	default:
	}
}

func TestRestartsAKilledProcess(t *testing.T) {
	ev, opts := newEvents(Options{Restarts: 3})
	s := New(opts)
	var starts atomic.Int32
	first := start(t, "sleep", "60")
	c := s.Add(context.Background(), "the sleeper", "/tmp/sleeper.log", first, starter(t, &starts, "sleep", "60"))
	defer c.Stop()

	first.kill()
	if got, want := <-ev.msgs, "the sleeper exited (signal: killed); restarting (1 of 3)"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	second := (<-ev.restarted).(proc)
	if c.Current() != second {
		t.Fatal("Current is not the restarted instance")
	}
	second.kill()
	if got, want := <-ev.msgs, "the sleeper exited (signal: killed); restarting (2 of 3)"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	third := (<-ev.restarted).(proc)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-third.Done():
	default:
		t.Error("Stop returned with the current instance still running")
	}
	if n := starts.Load(); n != 2 {
		t.Errorf("%d restarts, want 2", n)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err = %v after a clean stop", err)
	}
	ev.none(t)
}

func TestGivesUpOnAProcessThatKeepsExiting(t *testing.T) {
	ev, opts := newEvents(Options{Restarts: 2})
	s := New(opts)
	var starts atomic.Int32
	c := s.Add(context.Background(), "the quitter", "/var/log/quitter.log", start(t, "sh", "-c", "exit 3"),
		starter(t, &starts, "sh", "-c", "exit 3"))
	defer c.Stop()

	<-s.Failed()
	for i, want := range []string{
		"the quitter exited (exit status 3); restarting (1 of 2)",
		"the quitter exited (exit status 3); restarting (2 of 2)",
	} {
		if got := <-ev.msgs; got != want {
			t.Errorf("message %d: %q, want %q", i, got, want)
		}
	}
	ev.none(t)
	if n := starts.Load(); n != 2 {
		t.Errorf("%d restarts, want 2", n)
	}
	var gu *GaveUpError
	if !errors.As(s.Err(), &gu) {
		t.Fatalf("Err = %v, want a *GaveUpError", s.Err())
	}
	if gu.Name != "the quitter" || gu.Restarts != 2 {
		t.Errorf("GaveUpError %+v", gu)
	}
	want := "the quitter keeps exiting (exit status 3, after 2 restarts); stopping everything; its log: /var/log/quitter.log"
	if got := s.Err().Error(); got != want {
		t.Errorf("Err:\n got %q\nwant %q", got, want)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop after giving up: %v", err)
	}
}

func TestNoRestartsGivesUpAtOnce(t *testing.T) {
	ev, opts := newEvents(Options{Restarts: -1})
	s := New(opts)
	c := s.Add(context.Background(), "worker", "stderr", start(t, "sh", "-c", "exit 0"), func(context.Context) (Process, error) {
		t.Error("restarted")
		return nil, errors.New("no")
	})
	defer c.Stop()
	<-s.Failed()
	if got, want := s.Err().Error(), "worker exited (exit status 0); stopping everything; its log: stderr"; got != want {
		t.Errorf("Err %q, want %q", got, want)
	}
	ev.none(t)
}

func TestFailedRestartsCount(t *testing.T) {
	ev, opts := newEvents(Options{Restarts: 2})
	s := New(opts)
	var tries atomic.Int32
	c := s.Add(context.Background(), "db", "", start(t, "sh", "-c", "exit 1"), func(context.Context) (Process, error) {
		tries.Add(1)
		return nil, errors.New("port in use")
	})
	defer c.Stop()
	<-s.Failed()
	if got, want := <-ev.msgs, "db exited (exit status 1); restarting (1 of 2)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got, want := <-ev.msgs, "db did not restart (port in use); retrying (2 of 2)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if n := tries.Load(); n != 2 {
		t.Errorf("%d tries, want 2", n)
	}
	if got := s.Err().Error(); !strings.Contains(got, "restart failed: port in use") {
		t.Errorf("Err %q does not give the restart error", got)
	}
}

func TestStopIsNoExit(t *testing.T) {
	ev, opts := newEvents(Options{})
	s := New(opts)
	p := start(t, "sleep", "60")
	c := s.Add(context.Background(), "sleeper", "", p, func(context.Context) (Process, error) {
		t.Error("restarted after Stop")
		return nil, errors.New("no")
	})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if s.Err() != nil {
		t.Errorf("Err = %v", s.Err())
	}
	ev.none(t)
}

func TestCanceledContextEndsSupervision(t *testing.T) {
	ev, opts := newEvents(Options{})
	s := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	p := start(t, "sleep", "60")
	c := s.Add(ctx, "sleeper", "", p, func(context.Context) (Process, error) {
		t.Error("restarted after the context was canceled")
		return nil, errors.New("no")
	})
	cancel()
	<-c.watched // the watcher has returned
	p.kill()
	<-p.Done()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	ev.none(t)
	if s.Err() != nil {
		t.Errorf("Err = %v", s.Err())
	}
}

// A child that stays up for ResetAfter has its count reset: it is restarted
// again and again, never given up on.
func TestResetAfterALongRun(t *testing.T) {
	ev, opts := newEvents(Options{Restarts: 1})
	opts.ResetAfter = time.Nanosecond
	s := New(opts)
	var starts atomic.Int32
	c := s.Add(context.Background(), "flaky", "", start(t, "sh", "-c", "exit 2"), starter(t, &starts, "sh", "-c", "exit 2"))
	for range 5 {
		if got, want := <-ev.msgs, "flaky exited (exit status 2); restarting (1 of 1)"; got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	}
	c.Stop()
	if s.Err() != nil {
		t.Errorf("gave up: %v", s.Err())
	}
}
