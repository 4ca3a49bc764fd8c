// Package errclass sorts every error gitfleet meets into the three classes of
// architecture §2, so that no call site decides on its own whether to retry:
//
//   - Retryable: the same owner may try again, maybe after a delay.
//   - Permanent: no progress without an external change (not found,
//     permission denied, malformed input, unsupported).
//   - StaleOwner: this attempt is no longer authoritative (fence rejected,
//     lease expired); stop at once.
//
// The package is pure classification: turning a class into a Temporal
// ApplicationError happens at the activity boundary.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package errclass
