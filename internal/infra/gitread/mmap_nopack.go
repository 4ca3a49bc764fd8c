//go:build !(linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64 || mips64 || mips64le))

package gitread

import "os"

// mapPack does not map packs here (see the Linux version): they are read
// with ReadAt.
func mapPack(*os.File, int64) ([]byte, func() error) { return nil, nil }

func dropPages([]byte) {}
