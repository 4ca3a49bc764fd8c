// Package config reads the settings the worker and the starter share from
// the environment, with defaults that match the local dev stack (`make run`).
//
// Invariants: every environment variable a gitfleet process reads is
// declared once, in settings.go (name, kind, default, unit, readers,
// secret, one line of help), and Load takes each fixed default from there.
// `worker --help` and `starter --help` (WriteHelp) and docs/settings.md's
// tables (WriteDocTable) are written from it; tests hold Load
// (TestVarsMatchLoad, TestDeclaredDefaultsAreLoads), the readers' own
// fallbacks (TestDeclaredDefaultsAreTheCodes), the source
// (TestEveryGitfleetVariableIsDeclared), the doc (TestSettingsDoc) and
// docker-compose.yml (TestComposeEnvironmentIsDeclared) to it. A
// GITFLEET_* variable it does not declare gets a warning at start
// (Unknown).
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package config
