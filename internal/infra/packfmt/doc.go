// Package packfmt reads and writes Git's pack formats: the delta format of
// pack entries (ApplyDelta, shared with gitwalk's pack reader) and an
// indexer that builds the version 2 .idx of a pack while the pack is being
// received, as `git index-pack` does (Indexer), with a Deflate decoder of
// its own for the pack's zlib streams.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package packfmt
