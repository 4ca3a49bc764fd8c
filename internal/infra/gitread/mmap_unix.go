//go:build unix

package gitread

import (
	"os"
	"syscall"
)

// mapFile maps the whole of f read-only: a pack index is searched in place
// without copying it onto the heap (the pages a search touches are read
// from the page cache, shared with every other reader of the file, and
// count towards no garbage-collected heap). Index files are never written
// in place (git and gitfleet write a new one and rename it), so the
// mapping stays valid, even once the file is removed. unmap releases it.
func mapFile(f *os.File) (data []byte, unmap func() error, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := fi.Size()
	if size <= 0 || size != int64(int(size)) {
		return readAll(f)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readAll(f) // a file system without mmap
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
