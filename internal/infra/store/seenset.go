package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The blobs a scope has seen are kept packed (migration 00058): a row of
// seen_blob_chunks holds up to seenChunkIDs 20-byte ids of one scope whose
// first byte falls in one bucket. One row a blob cost 119 bytes for 20 of
// id (BenchmarkDatabaseBytes measures both); a full chunk costs about 21 a
// blob. Blobs a chunk does not hold — skipped as oversized, which every
// run counts (OversizedBlobs), and ids of another length — are rows of
// seen_blobs, as is what was written before 00058 until the cleanup packs
// it (packLegacyStep): every lookup reads both.
const (
	seenIDLen    = 20
	seenBuckets  = 64
	seenChunkIDs = 96 // 1,920 bytes: under TOAST's threshold, a chunk stays in its page
)

// seenBucket is the bucket of an id: its first six bits. Object ids are
// hashes: the buckets fill evenly.
func seenBucket(id []byte) int16 { return int16(id[0] >> 2) }

// packable reports whether a seen blob goes in a chunk.
func packable(b SeenBlob) bool { return len(b.Blob) == seenIDLen && b.Outcome != OutcomeOversized }

// seenChunk is one chunk row.
type seenChunk struct {
	bucket int16
	chunk  int32
	ids    []byte
}

// readChunks returns the scope's chunks of the buckets the ids fall in.
func readChunks(ctx context.Context, q querier, scopeID int64, ids [][]byte) ([]seenChunk, error) {
	var buckets []int16
	var in [seenBuckets]bool
	for _, id := range ids {
		if len(id) == seenIDLen && !in[seenBucket(id)] {
			in[seenBucket(id)] = true
			buckets = append(buckets, seenBucket(id))
		}
	}
	if len(buckets) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT bucket, chunk, ids FROM seen_blob_chunks WHERE scope_id = $1 AND bucket = ANY($2)`, scopeID, buckets)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (seenChunk, error) {
		var c seenChunk
		err := row.Scan(&c.bucket, &c.chunk, &c.ids)
		return c, err
	})
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// seenIn marks which of want the scope has seen, in its chunks and in
// seen_blobs.
func seenIn(ctx context.Context, q querier, scopeID int64, want [][]byte, seen map[string]bool) error {
	wanted := make(map[string]bool, len(want))
	for _, b := range want {
		wanted[string(b)] = true
	}
	chunks, err := readChunks(ctx, q, scopeID, want)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		for i := 0; i+seenIDLen <= len(c.ids); i += seenIDLen {
			if id := string(c.ids[i : i+seenIDLen]); wanted[id] {
				seen[id] = true
			}
		}
	}
	return seenLegacy(ctx, q, scopeID, want, seen)
}

// writeSeen records seen blobs, insert-if-absent: the packable ones in
// chunks, the rest as rows of seen_blobs.
func writeSeen(ctx context.Context, tx pgx.Tx, scopeID int64, seen []SeenBlob) error {
	var packed [][]byte
	var blobs [][]byte
	var outcomes []string
	for _, b := range seen {
		if packable(b) {
			packed = append(packed, b.Blob)
		} else {
			blobs, outcomes = append(blobs, b.Blob), append(outcomes, b.Outcome)
		}
	}
	if len(blobs) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO seen_blobs (scope_id, blob, outcome)
			SELECT $1, b, o FROM unnest($2::bytea[], $3::text[]) AS t(b, o)
			ON CONFLICT DO NOTHING`, scopeID, blobs, outcomes); err != nil {
			return err
		}
	}
	return packSeen(ctx, tx, scopeID, packed)
}

// packSeen adds 20-byte ids to the scope's chunks, but those the scope
// has seen already (in a chunk or in seen_blobs): replaying a batch
// changes nothing. Writers of one scope take turns on its scan_scopes row
// (FOR NO KEY UPDATE: foreign key checks, which take KEY SHARE, go on),
// so two never append to one chunk from the same reading.
func packSeen(ctx context.Context, tx pgx.Tx, scopeID int64, ids [][]byte) error {
	if len(ids) == 0 {
		return nil
	}
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM scan_scopes WHERE id = $1 FOR NO KEY UPDATE`, scopeID).Scan(&one); err != nil {
		return fmt.Errorf("lock scope %d: %w", scopeID, err)
	}
	chunks, err := readChunks(ctx, tx, scopeID, ids)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	if err := seenLegacy(ctx, tx, scopeID, ids, have); err != nil {
		return err
	}
	// The last chunk of each bucket, which takes new ids until full.
	var last [seenBuckets]*seenChunk
	for i := range chunks {
		c := &chunks[i]
		for j := 0; j+seenIDLen <= len(c.ids); j += seenIDLen {
			have[string(c.ids[j:j+seenIDLen])] = true
		}
		if l := last[c.bucket]; l == nil || c.chunk > l.chunk {
			last[c.bucket] = c
		}
	}
	var changed []*seenChunk
	dirty := map[*seenChunk]bool{}
	for _, id := range ids {
		if have[string(id)] {
			continue
		}
		have[string(id)] = true
		k := seenBucket(id)
		c := last[k]
		if c == nil || len(c.ids)+seenIDLen > seenChunkIDs*seenIDLen {
			next := int32(0)
			if c != nil {
				next = c.chunk + 1
			}
			c = &seenChunk{bucket: k, chunk: next}
			last[k] = c
		}
		c.ids = append(c.ids[:len(c.ids):len(c.ids)], id...)
		if !dirty[c] {
			dirty[c] = true
			changed = append(changed, c)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	buckets, nums, data := make([]int16, len(changed)), make([]int32, len(changed)), make([][]byte, len(changed))
	for i, c := range changed {
		buckets[i], nums[i], data[i] = c.bucket, c.chunk, c.ids
	}
	_, err = tx.Exec(ctx, `INSERT INTO seen_blob_chunks (scope_id, bucket, chunk, ids)
		SELECT $1, b, c, i FROM unnest($2::int2[], $3::int4[], $4::bytea[]) AS t(b, c, i)
		ON CONFLICT (scope_id, bucket, chunk) DO UPDATE SET ids = excluded.ids`, scopeID, buckets, nums, data)
	return err
}

// seenLegacy marks which of ids are rows of seen_blobs.
func seenLegacy(ctx context.Context, q querier, scopeID int64, ids [][]byte, seen map[string]bool) error {
	rows, err := q.Query(ctx, `SELECT blob FROM seen_blobs WHERE scope_id = $1 AND blob = ANY($2)`, scopeID, ids)
	if err != nil {
		return err
	}
	var b []byte
	_, err = pgx.ForEachRow(rows, []any{&b}, func() error {
		seen[string(b)] = true
		return nil
	})
	return err
}

// packLegacyStep packs up to batch of the rows of seen_blobs written
// before migration 00058 of the first scope from after on that has any,
// in one transaction: they leave seen_blobs as they enter its chunks, so
// a lookup finds each in one or the other at every moment. It returns the
// scope it worked on (it comes back until none is left) and how many it
// packed; none when no scope has any.
func (s *Store) packLegacyStep(ctx context.Context, after int64, batch int) (int64, int64, error) {
	var scopeID int64
	err := s.pool.QueryRow(ctx, `SELECT scope_id FROM seen_blobs WHERE scope_id >= $1 AND outcome <> 'oversized' AND length(blob) = 20
		ORDER BY scope_id LIMIT 1`, after).Scan(&scopeID)
	if err == pgx.ErrNoRows {
		return after, 0, nil
	}
	if err != nil {
		return after, 0, err
	}
	var n int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM seen_blobs WHERE ctid = ANY(ARRAY(
				SELECT ctid FROM seen_blobs WHERE scope_id = $1 AND outcome <> 'oversized' AND length(blob) = 20 LIMIT $2))
			RETURNING blob`, scopeID, batch)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		n = int64(len(ids))
		return packSeen(ctx, tx, scopeID, ids)
	})
	return scopeID, n, err
}
