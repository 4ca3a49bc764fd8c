// Package store is gitfleet's PostgreSQL data: codebases, their collection
// history, and the transactions that change them. Schema changes are goose
// migrations embedded in the binary; the worker applies them on start.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package store
