// Command starter is gitfleet's command line: it starts collections, scans
// and the other workflows, shows their results (findings, reports,
// repositories, snapshots, runners), administers the installation
// (migrate, setup, the finding key) and, built with -tags devstack, runs
// the local dev stack (starter dev, `make run`).
//
// Invariants: one exit rule for every command — 0 done, 1 an operation
// that ran and failed, 2 a usage error with nothing started
// (TestExitCodesFollowOneRule); input is checked before anything starts;
// text from repositories, registries and hosts is printed with the bytes a
// terminal would act on escaped (textsafe.Printable); the production
// binary links nothing of internal/devstack (layout_test.go).
package main
