//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package gitread

import (
	"os"
	"syscall"
)

// mapPack maps the first size bytes of pack file f read-only, for readers
// to read objects in place, without a system call per read (see
// Packs.pages). Nil (and no error) where the pack cannot be mapped: it is
// then read with ReadAt. Packs are never written in place (git and gitfleet
// write a new one and rename it), so the mapping stays valid, even once the
// file is removed. Only on 64-bit systems: a 32-bit address space has no
// room for large packs.
func mapPack(f *os.File, size int64) ([]byte, func() error) {
	if size <= 0 || size != int64(int(size)) {
		return nil, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil
	}
	return data, func() error { return syscall.Munmap(data) }
}

// dropPages removes data's pages from the process's resident set: they stay
// in the page cache, and the next read of them maps them again (a minor
// page fault, no I/O).
func dropPages(data []byte) {
	_ = syscall.Madvise(data, syscall.MADV_DONTNEED)
}
