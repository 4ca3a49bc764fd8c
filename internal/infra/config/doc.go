// Package config reads the settings the worker and the starter share from
// the environment, with defaults that match the local dev stack (`make run`).
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package config
