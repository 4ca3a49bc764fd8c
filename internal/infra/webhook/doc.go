// Package webhook receives a GitHub App's webhook deliveries and turns the
// events gitfleet acts on (pushes, renames, installations and their
// repositories) into collections (architecture §5, "Push-time detection").
//
// Invariants: only a delivery signed with the App's webhook secret is
// read; a delivery is answered only once what it asks is handed to
// Temporal, and one whose hand-off failed is answered 503 and not
// recorded, so GitHub's redelivery of it is handled; a delivery recorded
// as handled starts nothing again. Its body is bounded (MaxBody) and names
// from it are checked before they name anything.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package webhook
