package shard

import (
	"fmt"

	"gitfleet/internal/domain/target"
)

// Status is a shard's persisted lifecycle state: exactly these four. The
// phases a run goes through while Active are worker-local and never stored.
type Status string

const (
	Active Status = "Active"
	Done   Status = "Done"
	Split  Status = "Split" // reserved: repository shards are never split
	Parked Status = "Parked"
)

// Spec describes a shard: its key and what it scans.
type Spec struct {
	Key string `json:"key"`
	// CodebaseID is the codebase a collection's shard scans (0 for a scan
	// requested by location).
	CodebaseID int64 `json:"codebaseId,omitempty"`
	target.Target
}

// CodebaseKey is the shard key of a codebase: keyed by the codebase, so a
// renamed repository continues from its watermarks and a recreated one (a
// new codebase) starts afresh.
func CodebaseKey(codebaseID int64) string { return fmt.Sprintf("codebase:%d", codebaseID) }

// Lease is an owner's claim on a shard. The fence is what every durable
// write presents; a higher fence supersedes it forever.
type Lease struct {
	ShardID int64  `json:"shardId"`
	Fence   int64  `json:"fence"`
	Owner   string `json:"owner"`
}

// Counts are what a scan run did.
type Counts struct {
	Commits      int64 `json:"commits"`
	BlobsScanned int64 `json:"blobsScanned"`
	BytesScanned int64 `json:"bytesScanned"`
	BlobsSkipped int64 `json:"blobsSkipped"`
	// Findings counts the findings that were new.
	Findings int64 `json:"findings"`
}

// Receipt is the small, durable proof that a finalize happened: the outer
// frontier advances only from one of the current fence.
type Receipt struct {
	ID       int64 `json:"id"`
	ShardID  int64 `json:"shardId"`
	ScopeID  int64 `json:"scopeId"`
	Fence    int64 `json:"fence"`
	Complete bool  `json:"complete"`
	Counts
}
