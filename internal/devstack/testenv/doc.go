// Package testenv gives an integration test binary the real parts it runs
// against: one Temporal dev server (the pinned CLI) and one private
// PostgreSQL cluster with a migrated database, started once per test binary
// from TestMain and shared by its tests, which isolate themselves by
// repository names.
//
// Nothing here skips: a missing CLI or PostgreSQL fails the binary with a
// message saying what to install.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package testenv
