// Package activities implements the activities that package workflows
// schedules by name: methods on structs that carry their dependencies
// (database, mirrors, hosts), so tests build them with fakes or real parts
// alike. Their payload types are the protocol in workflows/api.go.
//
// Every error leaving an activity is a *temporal.ApplicationError whose type
// is one of errclass's classes, returned unwrapped: wrapping would hide the
// type from the server and turn a Permanent error into a retried one.
//
// The structs: Activities (collection), Shards (shard execution: syncs and
// scans under a lease and its fence), Sweeps (the re-collection sweep),
// GitHub (the API cache), Snapshots (the snapshot tables), Builds (a
// snapshot built on the repository's worker from its mirror), Runner (a
// runner's image store: pulls, removals, inventory, and the builds of
// runs from before build-on-owner), Notifications (alerts),
// Validity (validity checks), CodeScanning (uploads), Cleanup (the daily
// cleanup) and the smaller ones beside them.
//
// A shard's writes carry its lease's fence: an attempt taken over writes
// nothing (StaleOwner). No payload or heartbeat carries a secret or a
// token, and errors leaving the shard activities are redacted of the
// repository's paths, refs and commits (architecture §11; TestRedact).
package activities
