// Package archive opens the archives and compressed files committed to a
// repository so that the scanner can look inside them (architecture §8):
// zip (and every zip container: jar, war, apk, docx…), tar, and gzip,
// bzip2, zstd, xz and snappy streams, nested to a depth. It recognises them
// by their content (magic bytes), never by name, and calls back with each
// regular file's inner path and content (a text file too large to hold
// whole in overlapping parts, Options.Overlap).
//
// Everything it reads is hostile until proven otherwise. Declared sizes are
// never trusted: every byte is read through a limit, and the work of one
// blob is bounded by Limits (bytes decompressed, entries listed, expansion
// ratio), by Options.MaxEntryBytes per file and by the depth. Hitting a
// bound ends the file, or the walk, in a Skip that says why; a damaged
// archive is a Skip too. Nothing here panics on bad input, and nothing
// touches the file system: an inner path, `../` and absolute ones included,
// is only ever a display string.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package archive
