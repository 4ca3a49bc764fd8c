// Package logging builds gitfleet's zap loggers and adapts them for the
// Temporal SDK, so the SDK's own messages come out through the same logger.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package logging
