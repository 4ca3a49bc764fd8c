// Package faulttest holds the fault-injection tests of shard execution: they
// run real worker processes (the worker binary, built once per test run)
// against a Temporal dev server, PostgreSQL and the test forge, and kill,
// stop and resume those processes mid-scan to prove architecture §4's invariants
// hold across crashes and zombie attempts.
//
// The package has no code of its own; everything is in its tests.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package faulttest
