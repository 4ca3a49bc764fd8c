package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Process is a started child.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts cmd in its own process group (so a terminal's Ctrl-C reaches
// only the parent, which stops its children in order) and asks the kernel to
// send deathSig to it if the parent dies first (Linux).
//
// Pdeathsig fires when the thread that forked the child exits, not the
// process, so the child is started from a goroutine locked to its OS thread
// that stays alive, waiting for the child, for as long as the child runs.
func Start(cmd *exec.Cmd, deathSig syscall.Signal) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setPdeathsig(cmd.SysProcAttr, deathSig)
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is never unlocked: when this goroutine returns the
		// runtime ends the thread, harmless once the child has exited.
		if err := cmd.Start(); err != nil {
			p.err = err
			close(p.done)
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Done is closed when the child has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the child's exit error; valid once Done is closed.
func (p *Process) Err() error { return p.err }
