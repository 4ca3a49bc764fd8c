// Package metrics holds gitfleet's own counters in one place, so every
// part counts the same way and one endpoint can expose them all in the
// Prometheus text format. Label values are kinds and statuses, never
// names, URLs, tokens or anything a user typed.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package metrics
