// Package workflows holds gitfleet's Temporal workflows — the protocol and
// the orchestration — one per file with its input and result types beside
// it; api.go (and snapshot_api.go for the snapshots) holds what travels
// through Temporal: task queues, workflow ids, search attributes, activity
// names and every activity payload type.
//
// Invariants:
//   - Workflow code is deterministic: no I/O, clock or randomness but the
//     SDK's. Every history in testdata/histories replays against the
//     current code (workflows/unittest's TestReplayRecordedHistories).
//   - A change to a workflow that may have running executions goes through
//     a change id declared in changes.go and asked with version(ctx, id,
//     max), or a baseline of package versioning (baseline.go), with a
//     recorded history of its new path; a change id retires as
//     docs/architecture.md says ("Retiring a change id").
//   - Activities are scheduled by name: this package imports no activity
//     implementation and no store, only internal/domain,
//     internal/infra/errclass and workflows/versioning (imports_test.go;
//     activities' TestWorkflowsScheduleRegisteredActivities checks every
//     name is registered).
//   - Git work (what reads a repository's mirror: syncs, fetches by SHA,
//     scans, builds, validity checks) is placed on the Git queue of the
//     repository's owner; bookkeeping stays on TaskQueue.
//   - No token, secret or repository file name enters an input, a result
//     or a failure: histories are readable by whoever reads Temporal
//     (TestTokenNeverLeaks, TestHistoriesCarryNoPaths).
package workflows
