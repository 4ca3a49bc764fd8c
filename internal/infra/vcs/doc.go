// Package vcs knows the Git hosts gitfleet may collect from: how users name
// them, where their repositories are cloned from, and how to ask their API
// who a repository is (architecture §3): a Directory per host answers
// "which repository is owner/name now?". GitHub and GitHub Enterprise
// Server through go-github are the first implementation.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package vcs
