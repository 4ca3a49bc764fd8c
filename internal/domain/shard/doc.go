// Package shard holds the values of shard execution (architecture §4) that the
// store persists and the workflows carry: what a shard is (Spec), its
// persisted lifecycle (Status), an owner's claim on it (Lease) and the
// durable proof of a finalize (Receipt).
//
// Pure values: no Temporal, no SQL. The rules that act on them (fence
// checks, checkpoints) live where the state does, in the store's
// transactions.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package shard
