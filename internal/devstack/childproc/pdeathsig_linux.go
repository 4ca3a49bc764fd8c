package childproc

import "syscall"

// setPdeathsig asks the kernel to send sig to the child when the thread that
// started it exits (see Start).
func setPdeathsig(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}
