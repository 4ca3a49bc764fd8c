//go:build unix

package gitread

import "syscall"

// oNonblock makes opening a FIFO return at once.
const oNonblock = syscall.O_NONBLOCK
