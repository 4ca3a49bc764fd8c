// Package snapshot holds the rules of snapshot propagation (architecture §7):
// what a snapshot, a runner and a runner's copy of a snapshot (a row of
// snapshot_runners) are, their states, which names are safe, where each
// runner pulls from (Planner), and what a reconcile must do when a runner's
// store and the rows disagree (Reconcile).
//
// Pure values and decisions: the store persists them, the workflows carry
// them, the runners act on them.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package snapshot
