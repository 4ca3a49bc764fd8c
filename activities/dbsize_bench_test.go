package activities_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/activities"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/store"
)

// Goal of BenchmarkDatabaseBytes: a fleet of 1,000,000 repositories of
// 10,000 blobs each (the capacity section's upper case, architecture §10)
// fits one PostgreSQL node with room to spare. A node's practical size is
// about 2 TB of data volume (one NVMe disk, a restore of a few hours); half
// of it is for the database, the rest for what vacuum, index builds, WAL
// and growth need beside it.
const (
	goalFleetRepos     = 1_000_000
	goalBlobsPerRepo   = 10_000
	goalFleetDatabaseB = 1e12
)

// BenchmarkDatabaseBytes measures what the database keeps for a repository
// and for each blob it scanned: the real-code corpus (repogen.RealCode)
// scanned in full, then every table's growth (pg_total_relation_size: rows,
// indexes, TOAST) and the seen set's bytes a blob. Then the seen set of
// repositories of 1,000 and 10,000 blobs (the corpus' ids, written as a
// scan writes them, 100,000 in all), and the same ids in the one-row-a-blob
// layout of before migration 00058, measured in the same run. From these it
// projects 1,000,000 repositories against the goal.
func BenchmarkDatabaseBytes(b *testing.B) {
	c := realCorpus(b)
	before := tableSizes(b)
	_, res := ourScan(b, helperRequest{Repo: c.path, Key: fmt.Sprintf("bench:dbsize:%d", time.Now().UnixNano())})
	after := tableSizes(b)
	scope := res.Receipt.ScopeID
	ids := seenIDs(b, scope)
	blobs := int64(len(ids))
	if blobs == 0 {
		b.Fatal("the scan saw no blob")
	}
	var names []string
	var total, seen int64
	for name, size := range after {
		if d := size - before[name]; d > 0 {
			names = append(names, name)
			total += d
			if isSeenTable(name) {
				seen += d
			}
		}
	}
	sort.Slice(names, func(i, j int) bool { return after[names[i]]-before[names[i]] > after[names[j]]-before[names[j]] })
	perBlob := float64(seen) / float64(blobs)
	rest := restBytes(b, res.Receipt.ShardID, scope)

	fmt.Printf("\nDatabase bytes — %s\n", c.label)
	fmt.Printf("  one full scan: %d blobs seen, %d findings; the database grew by %s\n", blobs, res.Receipt.Findings, bytesOf(float64(total)))
	for _, name := range names {
		d := after[name] - before[name]
		fmt.Printf("    %-28s %10s  %7.1f B/blob\n", name, bytesOf(float64(d)), float64(d)/float64(blobs))
	}
	fmt.Printf("  seen set: %.1f B/blob; the scan's other rows: %s (their bytes, twice for indexes: a table this small grows by whole pages)\n",
		perBlob, bytesOf(rest))

	// Repositories of 1,000 and 10,000 blobs, 100,000 blobs each way.
	packed := map[int]float64{}
	rows := map[int]float64{}
	for _, n := range []int{1_000, 10_000} {
		packed[n] = seenBytesPerBlob(b, ids, n, writePacked)
		rows[n] = seenBytesPerBlob(b, ids, n, writeRows)
	}
	fmt.Printf("  seen set a blob, repositories of %6s: %5.1f B packed (seen_blob_chunks), %5.1f B a row a blob (seen_blobs, before 00058)\n",
		"1,000", packed[1_000], rows[1_000])
	fmt.Printf("  %-35s %6s: %5.1f B packed, %5.1f B a row a blob\n", "", "10,000", packed[10_000], rows[10_000])
	b.ReportMetric(perBlob, "seen-B/blob")
	b.ReportMetric(packed[1_000], "seen-B/blob@1k")
	b.ReportMetric(rows[1_000], "row-B/blob@1k")

	fmt.Printf("  1,000,000 repositories (the seen set, plus %s a repository of other rows):\n", bytesOf(rest))
	project := func(label string, n int64, perBlob float64) float64 {
		fleet := goalFleetRepos * (float64(n)*perBlob + rest)
		line := fmt.Sprintf("    %-22s %6d blobs a repository: %8s (seen %s)", label, n, bytesOf(fleet), bytesOf(goalFleetRepos*float64(n)*perBlob))
		if n == goalBlobsPerRepo {
			verdict := "ok"
			if fleet > goalFleetDatabaseB {
				verdict = "MISSED"
			}
			line += fmt.Sprintf("   goal ≤ %s: %s", bytesOf(goalFleetDatabaseB), verdict)
		}
		fmt.Println(line)
		return fleet
	}
	project("packed", 1_000, packed[1_000])
	fleet := project("packed", goalBlobsPerRepo, packed[10_000])
	project("packed", blobs, perBlob)
	project("a row a blob (before)", 1_000, rows[1_000])
	project("a row a blob (before)", goalBlobsPerRepo, rows[10_000])
	b.ReportMetric(fleet/1e9, "fleet-GB")
	fmt.Println()
}

// seenIDs are the ids of the blobs a scope has seen.
func seenIDs(b *testing.B, scope int64) [][]byte {
	b.Helper()
	rows, err := env.Store.Pool().Query(context.Background(), `SELECT blob FROM seen_blob_ids WHERE scope_id = $1 AND length(blob) = 20`, scope)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

// restBytes are the bytes of the rows a scan wrote outside the seen set
// (its shard, scope, receipts, watermarks, findings, secrets, paths,
// presence), each row's own size and line pointer, twice for the indexes:
// a table this small grows by whole pages, which says nothing of a fleet.
func restBytes(b *testing.B, shardID, scope int64) float64 {
	b.Helper()
	var n int64
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM shards t WHERE id = $1) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM scan_scopes t WHERE id = $2) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM shard_receipts t WHERE scope_id = $2) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM shard_watermarks t WHERE scope_id = $2) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM findings t WHERE scope_id = $2) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM secrets t WHERE scope_id = $2) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM finding_paths t WHERE scope_id = $2) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM finding_presence t WHERE scope_id = $2) +
		(SELECT coalesce(sum(pg_column_size(t.*) + 4), 0) FROM finding_presence_refs t WHERE scope_id = $2)`,
		shardID, scope).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return 2 * float64(n)
}

// seenBytesPerBlob writes the seen sets of repositories of n blobs each
// (100,000 blobs in all, taken from ids, cycling) with write, and returns
// the seen tables' growth a blob.
func seenBytesPerBlob(b *testing.B, ids [][]byte, n int, write func(*testing.B, int64, [][]byte)) float64 {
	b.Helper()
	ctx := context.Background()
	const all = 100_000
	before := tableSizes(b)
	for r := 0; r < all/n; r++ {
		id, err := env.Store.EnsureShard(ctx, shard.Spec{Key: fmt.Sprintf("target:bench-seen-%d-%d-%d", n, r, time.Now().UnixNano()),
			Target: target.Target{Location: "https://h/o/r"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.Store.Scope(ctx, id, "p"); err != nil {
			b.Fatal(err)
		}
		set := make([][]byte, n)
		for i := range set {
			set[i] = ids[(r*n+i)%len(ids)]
		}
		// A scan writes a batch of DefaultBatchBlobs at a time.
		for i := 0; i < n; i += activities.DefaultBatchBlobs {
			write(b, id, set[i:min(i+activities.DefaultBatchBlobs, n)])
		}
	}
	after := tableSizes(b)
	var grew int64
	for name := range after {
		if isSeenTable(name) {
			grew += after[name] - before[name]
		}
	}
	return float64(grew) / all
}

// writePacked writes seen blobs as a scan does (store.WriteData).
func writePacked(b *testing.B, shardID int64, ids [][]byte) {
	b.Helper()
	ctx := context.Background()
	c, err := env.Store.AcquireShard(ctx, shardID, "bench", time.Minute, true)
	if err != nil {
		b.Fatal(err)
	}
	scope, err := env.Store.Scope(ctx, shardID, "p")
	if err != nil {
		b.Fatal(err)
	}
	ops := store.DataOps{}
	for _, id := range ids {
		ops.Seen = append(ops.Seen, store.SeenBlob{Blob: id, Outcome: store.OutcomeScanned})
	}
	if _, err := env.Store.WriteData(ctx, c.Lease, scope, ops); err != nil {
		b.Fatal(err)
	}
}

// writeRows writes seen blobs a row each, as releases before migration
// 00058 did.
func writeRows(b *testing.B, shardID int64, ids [][]byte) {
	b.Helper()
	if _, err := env.Store.Pool().Exec(context.Background(), `INSERT INTO seen_blobs (scope_id, blob, outcome)
		SELECT (SELECT id FROM scan_scopes WHERE shard_id = $1 AND policy_hash = 'p'), b, 'scanned' FROM unnest($2::bytea[]) AS b
		ON CONFLICT DO NOTHING`, shardID, ids); err != nil {
		b.Fatal(err)
	}
}

// isSeenTable: the tables that hold the blobs a scope has seen.
func isSeenTable(name string) bool { return name == "seen_blobs" || name == "seen_blob_chunks" }

// tableSizes is every table's size with its indexes and TOAST.
func tableSizes(b *testing.B) map[string]int64 {
	b.Helper()
	rows, err := env.Store.Pool().Query(context.Background(), `SELECT c.relname, pg_total_relation_size(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r'`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			b.Fatal(err)
		}
		out[name] = size
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

func bytesOf(v float64) string {
	switch {
	case v >= 1e12:
		return fmt.Sprintf("%.2f TB", v/1e12)
	case v >= 1e9:
		return fmt.Sprintf("%.1f GB", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1f MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kB", v/1e3)
	}
	return fmt.Sprintf("%.0f B", v)
}
