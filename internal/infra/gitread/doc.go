// Package gitread is gitfleet's one engine for reading Git repositories:
// the pack formats (pack entries, deltas, version 2 indexes), an indexer
// that builds a pack's .idx while the pack is being received, as `git
// index-pack` does (Indexer; byte-identical output, several times faster
// than go-git's parser: BenchmarkIndexPack), a reader of objects straight
// from the packs (Packs, PackReader), and the walk that enumerates the blobs
// ranges of history introduce: the Git side of incremental secret scanning.
// Zlib streams are inflated with klauspost/compress (BenchmarkInflate).
//
// # The walk
//
// The Walker streams over the repository with go-git, or with the pack
// reader (Options.Packs). For each Range (one ref: its tip and its watermarks) it
// walks the commits reachable from the tip and not from the watermarks,
// diffs each commit's tree against its first parent's, skipping unchanged
// subtrees by hash, and reports every blob introduced, once per blob hash
// per Walk, after asking the caller whether the blob was already seen.
//
// # What a commit introduces
//
// A commit introduces the blobs whose (path, hash) entries are not in its
// first parent's tree: added or modified files, not deletions. A mode-only
// change (say 100644 to 100755) introduces nothing. A root commit introduces
// its whole tree. A merge commit is diffed against its first parent only:
// what the other parents bring was introduced by the commits on their side.
// Those commits are walked too when they are in the range, and being older
// they are diffed first, so the side's blobs are attributed to them and the
// merge's diff only meets them again (counted in Stats.Duplicates). When the
// side is excluded (it is behind a stop, so scanned before), the merge's
// first-parent diff reports the side's blobs once more, and the caller's
// Seen filters them. Blobs a merge creates itself (a conflict resolution)
// differ from the first parent and are reported. Submodule entries
// (gitlinks) are skipped; symbolic links are blobs and reported (their
// content is the link target). Every later introduction of a blob already
// reported (a copy, a rename, a restore, a merge meeting it again) goes to
// Options.Again, with its path and commit: every (path, blob) entry of a tip's
// tree was introduced by some commit below the tip, so a caller that records
// them knows every path at which to look for a blob.
//
// # Order
//
// Ranges are walked in the given order. Within a range, the commits are
// diffed oldest first: the walk collects the range's commits newest-first by
// committer date (ties broken by hash) and diffs them in reverse (so with
// skewed clocks a child may come before its parent). Within a
// commit, entries come in Git's tree order, depth first. The first (commit,
// path) where a blob is met wins, so a blob is attributed to the oldest
// commit of the first range that introduces it. The order depends only on the
// repository and the ranges: the same Walk reports the same blobs in the
// same order every time.
//
// # Shared history
//
// A Walk keeps one set of the commits it has diffed. A commit reached again
// by a later range is not diffed again, and once everything below a commit
// has been diffed (it is "closed") later ranges stop there: a thousand refs
// into one history walk it once.
//
// # Broken and unusual repositories
//
// ReadRefs reads refs as git does and never gives up on a repository for
// one bad ref: an empty or malformed ref file, a name git would not accept,
// a dangling symbolic ref and a junk line in packed-refs are skipped and
// counted (RefList.Ignored) — git warns about the first ones and skips the
// invalid names; it refuses a packed-refs file with junk in it whole, which
// would lose every packed ref.
//
// Refs may name any object. A ref (or a chain of annotated tags, however
// long) ending at a tree or a blob is scanned too: such content is as
// reachable — pushed, fetched, cloned — as a commit's (git.git itself tags a
// blob, its maintainer's public key). Its blobs are reported once with no
// commit; a blob named directly has the ref's name for a path.
//
// What the repository lacks (a partial clone's blobs or trees, a tip, a
// parent below a commit that is no shallow boundary) and blobs whose data is
// damaged are skipped and counted in Stats; a shallow clone's boundary is
// expected and not counted. Damage that hides an unknown amount of history
// — a commit, tree or tag that does not parse or inflate, a pack that does
// not match its index — is an error wrapping ErrCorrupt. Damaged data reads
// the same every time: errclass classifies ErrCorrupt Permanent, and go-git's
// own data errors are wrapped in ErrCorrupt where they leave this package.
//
// # Memory
//
// A Walk holds state per commit reached (about 150 bytes each), the set of
// blob hashes met (about 40 bytes each: what the once-per-blob guarantee
// needs) and a bounded LRU of parsed trees (Options.TreeCacheBytes); blob
// contents are never loaded by the walk. go-git adds its object cache and
// its in-memory pack indexes (about 80 bytes per object in the pack): see
// Open. On a repository of 10,000 commits, 50,000 blobs and 1,000 refs a
// full walk peaks at about 110 MB of heap, garbage included. With
// Options.Packs, go-git only serves what the packs lack: the Walker's pack
// reader adds up to 16 MiB of cached trees and delta bases to the Packs'
// indexes (shared with the blob readers), and the same walk peaks at about
// 55 MB.
//
// # Limits
//
// A repository is data from anyone: gitread bounds what reading one may
// cost (Limits, SetLimits; docs/architecture.md §11). Every object held in
// memory — an object read, a delta, its target, every intermediate of a
// chain, a delta's base — is within Limits.MaxObjectBytes, checked on the
// headers before anything is inflated or allocated; an Indexer receives no
// more than Limits.MaxPackBytes and names objects totalling at most 4,096
// times its pack (a Packs' readers resolve as much at most); objects over
// 16 MiB are resolved by one goroutine of the process at a time; delta
// chains end at 10,000 links (a cycle never ends) and trees at 4,096
// levels (MaxTreeDepth). Data over a bound is an error wrapping ErrLimit
// (a *LimitError naming the bound): valid Git, perhaps, but more than
// gitfleet reads. An Indexer refuses such an object alone: it is left out
// of the index, the rest of the pack indexed, and Index.Refused (written
// beside the index, read by OpenPacks) says why, so that a reader tells it
// refused, not missing (Packs.Refused). A repository's files are read within it, regular files
// only (ErrUnsafe otherwise): no symbolic link out of it, no FIFO, no
// device.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package gitread
