//go:build !unix

package gitread

import "os"

// mapFile reads the whole of f (see the unix version, which maps it).
func mapFile(f *os.File) ([]byte, func() error, error) { return readAll(f) }
