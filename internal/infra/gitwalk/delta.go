package gitwalk

import "gitfleet/internal/infra/packfmt"

// The delta format is decoded by package packfmt, which the pack indexer
// of gitmirror shares.

func deltaSizes(delta []byte) (src, tgt uint64, n int, err error) { return packfmt.DeltaSizes(delta) }

func applyDelta(dst, base, delta []byte) ([]byte, error) { return packfmt.ApplyDelta(dst, base, delta) }

const maxInt = int(^uint(0) >> 1)

// sized returns buf[:n] if buf has the capacity, else a new slice of n bytes.
func sized(buf []byte, n int) []byte { return packfmt.Sized(buf, n) }
