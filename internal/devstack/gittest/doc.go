// Package gittest holds Git fixtures for tests: a git runner that no user
// or system configuration reaches, and hand-made packs and deltas for the
// cases git never writes (corrupt entries, huge declared sizes, cycles).
//
// The pack encoding here is written independently of package gitread on
// purpose: a test that checks gitread against bytes gitread made would
// prove nothing.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package gittest
