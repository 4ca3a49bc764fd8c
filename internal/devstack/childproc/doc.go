// Package childproc starts helper processes (PostgreSQL, the Temporal dev
// server, workers) that must not outlive the process that started them.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package childproc
