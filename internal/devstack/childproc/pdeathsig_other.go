//go:build !linux

package childproc

import "syscall"

// setPdeathsig is a no-op where the kernel offers no parent-death signal: if
// the calling process dies without calling Stop, the server keeps running
// and a later Start reports the data directory as in use.
func setPdeathsig(attr *syscall.SysProcAttr, sig syscall.Signal) {}
