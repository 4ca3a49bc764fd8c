// Package target normalizes scan requests into shard targets (architecture §4):
// identical requests normalize to the same ordered targets, whatever the
// order, spelling or duplication of what the user typed, so that they map
// to the same shards and never scan twice.
//
// Pure: no network, no repository access. Whether an explicit commit exists
// and is a commit is checked when the shard executes.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package target
