package shard

import (
	"fmt"

	"gitfleet/internal/domain/archive"
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
	// Why the run is Partial, or what it skipped, by reason; none of these
	// is stored with the receipt: they are this run's report. Missing
	// counts objects the repository lacks (a partial clone's blobs or
	// trees, a tip, a parent that is no shallow boundary), Corrupt blobs
	// whose data is damaged and Unreadable blobs that failed to read
	// otherwise: each makes the run Partial. Oversized and Binary blobs are
	// skipped by the scanner; its configuration says whether that makes the
	// run Partial (by default oversized ones do, binary ones do not).
	// OutOfTime: the time budget ended the run (Partial). Refused counts
	// objects refused over one of the reading limits (a delta bomb, a
	// delta cycle, a tree nested too deep): recorded as lost holes with
	// the limit, read around, and making the run Partial.
	Missing    int64 `json:"missing,omitempty"`
	Corrupt    int64 `json:"corrupt,omitempty"`
	Unreadable int64 `json:"unreadable,omitempty"`
	Refused    int64 `json:"refused,omitempty"`
	Oversized  int64 `json:"oversized,omitempty"`
	Binary     int64 `json:"binary,omitempty"`
	OutOfTime  bool  `json:"outOfTime,omitempty"`
	// EarlierOversized counts blobs of the scope that earlier runs
	// skipped as oversized: seen, so no later run reads them, and never
	// scanned. Every run says so, and none of them is Complete while they
	// make a run Partial.
	EarlierOversized int64 `json:"earlierOversized,omitempty"`
	// RefsIgnored counts refs ignored as git ignores them (an empty or
	// malformed ref file, an invalid name, a dangling symbolic ref, a junk
	// line in packed-refs): they name nothing to scan and do not make the
	// run Partial.
	RefsIgnored int64 `json:"refsIgnored,omitempty"`
	// ArchiveSkips counts, by reason, what the scanner left out of the
	// archives it opened (binary files, 7z and rar archives included);
	// those blobs were scanned. A limit reached (a bomb) makes the run
	// Partial, and so do a file over the size limit and a binary file
	// when their blob counterparts do (scan.Scanner.ArchiveSkipIsPartial).
	ArchiveSkips ArchiveSkips `json:"archiveSkips,omitzero"`
}

// Breakdown is the part of the counts that a scan's batches count blob by
// blob — its skips by reason and its archives' skips — flat, by name, with
// only the counts that are not zero: the store sums a run's batches key by
// key (shards.run_skips), so a receipt reports the breakdown of every
// attempt of the scan, as it does its totals.
func (c Counts) Breakdown() map[string]int64 {
	m := map[string]int64{}
	for k, p := range c.breakdown() {
		if *p != 0 {
			m[k] = *p
		}
	}
	return m
}

// AddBreakdown adds a Breakdown to the counts (names it does not know are
// left out).
func (c *Counts) AddBreakdown(m map[string]int64) {
	fields := c.breakdown()
	for k, n := range m {
		if p, ok := fields[k]; ok {
			*p += n
		}
	}
}

func (c *Counts) breakdown() map[string]*int64 {
	a := &c.ArchiveSkips
	return map[string]*int64{
		"missing": &c.Missing, "corrupt": &c.Corrupt, "unreadable": &c.Unreadable, "refused": &c.Refused, "oversized": &c.Oversized, "binary": &c.Binary,
		"archive.depth": &a.Depth, "archive.entrySize": &a.EntrySize, "archive.expandedSize": &a.Bytes,
		"archive.entries": &a.Entries, "archive.ratio": &a.Ratio, "archive.memory": &a.Memory, "archive.corrupt": &a.Corrupt,
		"archive.encrypted": &a.Encrypted, "archive.unsupported": &a.Unsupported, "archive.binary": &a.Binary,
	}
}

// ArchiveSkips counts skips by archive.Reason. A struct rather than a map,
// so that counts and receipts compare with ==.
type ArchiveSkips struct {
	Depth       int64 `json:"depth,omitempty"`
	EntrySize   int64 `json:"entrySize,omitempty"`
	Bytes       int64 `json:"expandedSize,omitempty"`
	Entries     int64 `json:"entries,omitempty"`
	Ratio       int64 `json:"ratio,omitempty"`
	Memory      int64 `json:"memory,omitempty"`
	Corrupt     int64 `json:"corrupt,omitempty"`
	Encrypted   int64 `json:"encrypted,omitempty"`
	Unsupported int64 `json:"unsupported,omitempty"`
	Binary      int64 `json:"binary,omitempty"`
}

// Add counts n skips for reason r.
func (a *ArchiveSkips) Add(r archive.Reason, n int64) { *a.of(r) += n }

// Of is how many skips of reason r were counted.
func (a ArchiveSkips) Of(r archive.Reason) int64 { return *a.of(r) }

func (a *ArchiveSkips) of(r archive.Reason) *int64 {
	switch r {
	case archive.SkipDepth:
		return &a.Depth
	case archive.SkipEntrySize:
		return &a.EntrySize
	case archive.SkipBytes:
		return &a.Bytes
	case archive.SkipEntries:
		return &a.Entries
	case archive.SkipRatio:
		return &a.Ratio
	case archive.SkipMemory:
		return &a.Memory
	case archive.SkipCorrupt:
		return &a.Corrupt
	case archive.SkipEncrypted:
		return &a.Encrypted
	case archive.SkipBinary:
		return &a.Binary
	}
	return &a.Unsupported // and any reason this version does not know
}

// Receipt is the small, durable proof that a finalize happened: the outer
// frontier advances only from one of the current fence.
type Receipt struct {
	ID      int64 `json:"id"`
	ShardID int64 `json:"shardId"`
	ScopeID int64 `json:"scopeId"`
	Fence   int64 `json:"fence"`
	// Complete: the run walked every selected ref to its tip and skipped
	// nothing. Covered: it walked every ref to its tip (the watermarks are
	// there); what it could not read is left as holes, which every later
	// run tries again without walking the history again.
	Complete bool `json:"complete"`
	Covered  bool `json:"covered,omitempty"`
	// Holes and Lost are the scope's holes after the run: blobs that could
	// not be read and a later run may (missing from a mirror, damaged in
	// our copy), and those that cannot be recovered (missing or damaged
	// in the source itself).
	Holes int64 `json:"holes,omitempty"`
	Lost  int64 `json:"lost,omitempty"`
	Counts
}

// Settled says whether a run leaves its shard Done: everything up to the
// tips was read, or what was not cannot be recovered. A shard that is not
// settled stays Active, and the next run continues it.
func (r Receipt) Settled() bool { return r.Complete || (r.Covered && r.Holes == 0) }
