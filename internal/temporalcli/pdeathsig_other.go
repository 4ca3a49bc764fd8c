//go:build !linux

package temporalcli

import "syscall"

// setPdeathsig is a no-op where the kernel offers no parent-death signal: if
// the calling process dies without calling Stop, the dev server keeps
// running (it is in its own process group) and must be stopped by hand.
func setPdeathsig(attr *syscall.SysProcAttr, sig syscall.Signal) {}
