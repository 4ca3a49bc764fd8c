package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/errclass"
)

// Shard is a stored shard.
type Shard struct {
	shard.Spec
	ID                  int64        `json:"id"`
	Status              shard.Status `json:"status"`
	ParkReason          string       `json:"parkReason,omitempty"`
	Fence               int64        `json:"fence"`
	CheckpointReceiptID int64        `json:"checkpointReceiptId,omitempty"`
}

// EnsureShard returns the id of the shard with spec.Key, creating it if
// needed. A codebase's shard follows its repository's current location.
func (s *Store) EnsureShard(ctx context.Context, spec shard.Spec) (int64, error) {
	sel, err := json.Marshal(spec.Selection)
	if err != nil {
		return 0, err
	}
	var codebase *int64
	if spec.CodebaseID != 0 {
		codebase = &spec.CodebaseID
	}
	var id int64
	err = s.pool.QueryRow(ctx, `INSERT INTO shards (key, codebase_id, location, local, selection)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (key) DO UPDATE SET location = excluded.location, updated_at = now()
		RETURNING id`, spec.Key, codebase, spec.Location, spec.Local, sel).Scan(&id)
	return id, err
}

const shardColumns = `id, key, coalesce(codebase_id, 0), location, local, selection, status,
	coalesce(park_reason, ''), fence, coalesce(checkpoint_receipt_id, 0)`

func scanShard(row pgx.Row) (*Shard, error) {
	var sh Shard
	var sel []byte
	err := row.Scan(&sh.ID, &sh.Key, &sh.CodebaseID, &sh.Location, &sh.Local, &sel, &sh.Status,
		&sh.ParkReason, &sh.Fence, &sh.CheckpointReceiptID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &sh, json.Unmarshal(sel, &sh.Selection)
}

// ShardByID returns a shard or nil.
func (s *Store) ShardByID(ctx context.Context, id int64) (*Shard, error) {
	return scanShard(s.pool.QueryRow(ctx, `SELECT `+shardColumns+` FROM shards WHERE id = $1`, id))
}

// ShardByKey returns a shard or nil.
func (s *Store) ShardByKey(ctx context.Context, key string) (*Shard, error) {
	return scanShard(s.pool.QueryRow(ctx, `SELECT `+shardColumns+` FROM shards WHERE key = $1`, key))
}

// Claim is the outcome of AcquireShard: a lease when the shard is Active
// and free.
type Claim struct {
	Lease      shard.Lease
	Status     shard.Status
	ParkReason string
	// Busy reports a live lease of another owner, held until Deadline.
	Busy     bool
	Deadline time.Time
}

// AcquireShard claims an Active shard for owner: it bumps the fence, which
// makes every earlier holder stale, and sets the lease deadline on the
// database's clock. A live lease of another owner is not taken (Busy); an
// owner may take over from itself, which is how a retried activity attempt
// fences off the attempt it replaces. rearm turns a Done shard Active again
// (new work was requested); a Parked shard stays parked.
func (s *Store) AcquireShard(ctx context.Context, shardID int64, owner string, leaseFor time.Duration, rearm bool) (Claim, error) {
	var c Claim
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		c = Claim{}
		var holder string
		var live bool
		var deadline *time.Time
		err := tx.QueryRow(ctx, `SELECT status, coalesce(park_reason, ''), coalesce(owner, ''),
				coalesce(lease_deadline > clock_timestamp(), false), lease_deadline
			FROM shards WHERE id = $1 FOR UPDATE`, shardID).Scan(&c.Status, &c.ParkReason, &holder, &live, &deadline)
		if errors.Is(err, pgx.ErrNoRows) {
			return errclass.Permanentf(errclass.ReasonNotFound, "shard %d does not exist", shardID)
		}
		if err != nil {
			return err
		}
		if c.Status == shard.Done && rearm {
			c.Status = shard.Active
		}
		if c.Status != shard.Active {
			return nil
		}
		if live && holder != owner {
			c.Busy, c.Deadline = true, *deadline
			return nil
		}
		c.Lease = shard.Lease{ShardID: shardID, Owner: owner}
		return tx.QueryRow(ctx, `UPDATE shards SET status = 'Active', park_reason = NULL, fence = fence + 1, owner = $2,
				lease_deadline = clock_timestamp() + $3 * interval '1 millisecond', updated_at = now()
			WHERE id = $1 RETURNING fence, lease_deadline`, shardID, owner, leaseFor.Milliseconds()).Scan(&c.Lease.Fence, &c.Deadline)
	})
	return c, err
}

// checkLease is the fence check every durable write makes inside its own
// transaction: it locks the shard row, so a concurrent acquire (fence bump)
// either commits before the write and rejects it, or waits for it.
//
// The fence alone decides, not the lease deadline: a lease that ran out
// lets another owner take the shard over (AcquireShard), and taking over
// bumps the fence; until someone does, nobody else can have written, and
// the owner whose fence is current may go on (its activity may have waited
// in the task queue past the deadline, or behind a slow write). A shard
// released by a checkpoint or a park no longer belongs to the fence.
func checkLease(ctx context.Context, tx pgx.Tx, l shard.Lease) error {
	var fence int64
	var status shard.Status
	var owner string
	err := tx.QueryRow(ctx, `SELECT fence, status, coalesce(owner, '') FROM shards WHERE id = $1 FOR UPDATE`,
		l.ShardID).Scan(&fence, &status, &owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return errclass.StaleOwnerf("shard %d no longer exists", l.ShardID)
	case err != nil:
		return err
	case fence != l.Fence:
		return errclass.StaleOwnerf("shard %d: fence %d was superseded by fence %d", l.ShardID, l.Fence, fence)
	case status != shard.Active || owner != l.Owner:
		return errclass.StaleOwnerf("shard %d: fence %d was released (the shard is %s)", l.ShardID, l.Fence, status)
	}
	return nil
}

// RenewLease extends the lease of the owner whose fence is current and
// returns the new deadline, also when the deadline has passed: an owner
// renews at the start of every attempt, which may have waited in the task
// queue longer than the lease (see checkLease). Only a takeover ends it.
func (s *Store) RenewLease(ctx context.Context, l shard.Lease, leaseFor time.Duration) (time.Time, error) {
	var deadline time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE shards SET lease_deadline = clock_timestamp() + $2 * interval '1 millisecond'
			WHERE id = $1 RETURNING lease_deadline`, l.ShardID, leaseFor.Milliseconds()).Scan(&deadline)
	})
	return deadline, err
}

// Scope returns the scope of a shard under a policy (the rules, the
// finding key), creating it if needed, without recording the key's
// version (see KeyedScope): tests, on a schema of any age.
func (s *Store) Scope(ctx context.Context, shardID int64, policyHash string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `INSERT INTO scan_scopes (shard_id, policy_hash) VALUES ($1, $2)
		ON CONFLICT (shard_id, policy_hash) DO UPDATE SET policy_hash = excluded.policy_hash RETURNING id`,
		shardID, policyHash).Scan(&id)
	return id, err
}

// KeyedScope is Scope recording keyVersion, the version of the finding
// key the policy hashes secrets with, on the scope whose hashes it makes. A scope made before versions were recorded gets
// it from the first scan under a key of that policy: the policy holds the
// key's fingerprint, so it is the same key.
func (s *Store) KeyedScope(ctx context.Context, shardID int64, policyHash string, keyVersion int) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `INSERT INTO scan_scopes (shard_id, policy_hash, key_version) VALUES ($1, $2, NULLIF($3, 0))
		ON CONFLICT (shard_id, policy_hash) DO UPDATE
			SET key_version = COALESCE(scan_scopes.key_version, excluded.key_version) RETURNING id`,
		shardID, policyHash, keyVersion).Scan(&id)
	return id, err
}

// Watermarks returns the per-ref watermarks of a scope.
func (s *Store) Watermarks(ctx context.Context, scopeID int64) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT ref, commit_id FROM shard_watermarks WHERE scope_id = $1`, scopeID)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var ref, commit string
	_, err = pgx.ForEachRow(rows, []any{&ref, &commit}, func() error {
		out[ref] = commit
		return nil
	})
	return out, err
}

// AnySeen reports whether the scope has seen any blob: a run of a scope
// that has not (its first scan) need not ask SeenBlobs.
func (s *Store) AnySeen(ctx context.Context, scopeID int64) (bool, error) {
	var seen bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM seen_blob_chunks WHERE scope_id = $1)
		OR EXISTS (SELECT 1 FROM seen_blobs WHERE scope_id = $1)`, scopeID).Scan(&seen)
	return seen, err
}

// SeenBlobs returns which of blobs the scope has seen already (in its
// chunks or in seen_blobs, seenset.go).
func (s *Store) SeenBlobs(ctx context.Context, scopeID int64, blobs [][]byte) (map[string]bool, error) {
	seen := map[string]bool{}
	if len(blobs) == 0 {
		return seen, nil
	}
	return seen, seenIn(ctx, s.pool, scopeID, blobs, seen)
}

// Outcomes of a seen blob.
const (
	OutcomeScanned   = "scanned"
	OutcomeBinary    = "binary"
	OutcomeOversized = "oversized"
)

// SeenBlob is a blob the scope will not scan again.
type SeenBlob struct {
	Blob    []byte
	Outcome string
}

// Finding is a stored finding; it never holds the secret.
type Finding struct {
	RuleID     string `json:"rule"`
	Blob       []byte `json:"-"`
	BlobHex    string `json:"blob"`
	Start      int    `json:"start"`
	End        int    `json:"end"`
	Line       int    `json:"line"`
	Path       string `json:"path"`
	Commit     string `json:"commit"`
	SecretHash string `json:"secretHash"`
	Preview    string `json:"preview"`
	// Decoded names the encodings undone to find the secret ("base64",
	// "base64/hex"); empty when it is written as it is.
	Decoded string `json:"decoded,omitempty"`
	// Archive is the path of the file inside the blob, an archive, that
	// holds the secret ("lib/app.jar!config/app.env", see scan.Finding);
	// empty for a secret in the blob itself.
	Archive string `json:"archive,omitempty"`
	// Ignored is why a suppression the repository keeps applies
	// (suppress.Cause): the scan sets gitleaks:allow, a finalize
	// .gitleaksignore (migration 00032).
	Ignored string `json:"ignored,omitempty"`
}

// DataOps are the data-plane writes of a finalize: deterministically keyed,
// insert-if-absent, so replaying them changes nothing.
type DataOps struct {
	Seen     []SeenBlob
	Findings []Finding
	// Paths are more paths at which blobs holding findings were
	// introduced (a finding's own path is recorded with it), and at which
	// holes were met: a hole read later may hold findings.
	Paths []BlobPath
	// Holes are blobs the run could not read (recorded, or tried once
	// more); Filled are holes it has read now (they are in Seen).
	Holes  []Hole
	Filled [][]byte
	// FilledFindings: a filled hole holds findings. Presence rows of tips
	// the next run finds unmoved would not know of them: the next presence
	// is computed afresh for every tip.
	FilledFindings bool
	// Tally counts the batch's blobs toward the scan's durable tally
	// (RunTally); WriteData adds the new secrets it finds.
	Tally Tally
}

// Reasons a blob is a hole; an object refused over one of gitread's
// limits has the limit's reason (errclass.ReasonLimit + ": " + what, as
// "over a limit: delta chain"), and is lost: the same data trips the same
// bound (a tree nested too deep is recorded under its own hash).
const (
	HoleMissing    = "missing"
	HoleCorrupt    = "corrupt"
	HoleUnreadable = "unreadable"
)

// Hole is a blob a scan met and could not read (see migration 00013).
type Hole struct {
	Blob   []byte
	Path   string
	Commit string
	Reason string
	// Lost: it cannot be recovered (missing or damaged in the source).
	Lost bool
	// Attempts counts the runs that tried to read it.
	Attempts int
}

// Holes returns the scope's holes, in blob order.
func (s *Store) Holes(ctx context.Context, scopeID int64) ([]Hole, error) {
	rows, err := s.pool.Query(ctx, `SELECT blob, path, commit_id, reason, lost, attempts FROM shard_holes
		WHERE scope_id = $1 ORDER BY blob`, scopeID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Hole, error) {
		var h Hole
		err := row.Scan(&h.Blob, &h.Path, &h.Commit, &h.Reason, &h.Lost, &h.Attempts)
		return h, err
	})
}

// BlobPath is a path at which a blob was introduced.
type BlobPath struct {
	Blob []byte
	Path string
}

// WriteData writes data ops under the fence check and returns how many
// secrets were new: a SecretKey the scope had no finding of (the same
// secret in another blob version is another occurrence, not a new
// finding).
func (s *Store) WriteData(ctx context.Context, l shard.Lease, scopeID int64, ops DataOps) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		var err error
		if n, err = writeData(ctx, tx, scopeID, ops); err != nil {
			return err
		}
		t := ops.Tally
		skips := t.Skips
		if skips == nil {
			skips = map[string]int64{}
		}
		_, err = tx.Exec(ctx, `UPDATE shards SET run_scanned = run_scanned + $2, run_skipped = run_skipped + $3,
			run_bytes = run_bytes + $4, run_findings = run_findings + $5, run_skips = `+addSkips+` WHERE id = $1`,
			l.ShardID, t.Scanned, t.Skipped, t.Bytes, n, skips)
		return err
	})
	return n, err
}

func writeData(ctx context.Context, tx pgx.Tx, scopeID int64, ops DataOps) (int64, error) {
	if err := writeSeen(ctx, tx, scopeID, ops.Seen); err != nil {
		return 0, err
	}
	if len(ops.Findings)+len(ops.Paths) > 0 {
		blobs, paths := make([][]byte, 0, len(ops.Findings)+len(ops.Paths)), make([]string, 0, len(ops.Findings)+len(ops.Paths))
		for _, f := range ops.Findings {
			blobs, paths = append(blobs, f.Blob), append(paths, f.Path)
		}
		for _, p := range ops.Paths {
			blobs, paths = append(blobs, p.Blob), append(paths, p.Path)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO finding_paths (scope_id, blob, path)
			SELECT $1, b, p FROM unnest($2::bytea[], $3::text[]) AS t(b, p)
			ON CONFLICT DO NOTHING`, scopeID, blobs, paths); err != nil {
			return 0, err
		}
	}
	secrets, err := writeFindings(ctx, tx, scopeID, ops.Findings)
	if err != nil {
		return 0, err
	}
	return secrets, writeHoles(ctx, tx, scopeID, ops)
}

// writeHoles records the batch's holes (a hole tried again counts one
// more attempt and takes its latest reason) and drops those it filled.
func writeHoles(ctx context.Context, tx pgx.Tx, scopeID int64, ops DataOps) error {
	if len(ops.Holes) > 0 {
		n := len(ops.Holes)
		blobs, paths, commits, reasons, lost := make([][]byte, n), make([]string, n), make([]string, n), make([]string, n), make([]bool, n)
		for i, h := range ops.Holes {
			blobs[i], paths[i], commits[i], reasons[i], lost[i] = h.Blob, h.Path, h.Commit, h.Reason, h.Lost
		}
		if _, err := tx.Exec(ctx, `INSERT INTO shard_holes (scope_id, blob, path, commit_id, reason, lost)
			SELECT $1, b, p, c, r, l FROM unnest($2::bytea[], $3::text[], $4::text[], $5::text[], $6::bool[]) AS t(b, p, c, r, l)
			ON CONFLICT (scope_id, blob) DO UPDATE SET reason = excluded.reason, lost = excluded.lost,
				attempts = shard_holes.attempts + 1, tried_at = now()`, scopeID, blobs, paths, commits, reasons, lost); err != nil {
			return err
		}
	}
	if len(ops.Filled) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM shard_holes WHERE scope_id = $1 AND blob = ANY($2)`, scopeID, ops.Filled); err != nil {
			return err
		}
	}
	if ops.FilledFindings {
		if _, err := tx.Exec(ctx, `DELETE FROM finding_presence_refs WHERE scope_id = $1`, scopeID); err != nil {
			return err
		}
	}
	return nil
}

// writeFindings inserts findings and returns how many secrets were new.
func writeFindings(ctx context.Context, tx pgx.Tx, scopeID int64, findings []Finding) (int64, error) {
	if len(findings) == 0 {
		return 0, nil
	}
	n := len(findings)
	rule, path, commit, hash, preview, decoded := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	archive, ignored := make([]string, n), make([]string, n)
	blob := make([][]byte, n)
	start, end, line := make([]int32, n), make([]int32, n), make([]int32, n)
	for i, f := range findings {
		rule[i], blob[i], path[i], commit[i], hash[i], preview[i], decoded[i] = f.RuleID, f.Blob, f.Path, f.Commit, f.SecretHash, f.Preview, f.Decoded
		start[i], end[i], line[i], archive[i], ignored[i] = int32(f.Start), int32(f.End), int32(f.Line), f.Archive, f.Ignored
	}
	// New secrets: the main query reads the table as it was before the
	// insert of its WITH, so a pair counts only if no earlier row has it.
	var secrets int64
	err := tx.QueryRow(ctx, `WITH ins AS (
			INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview, decoded, archive,
				secret_path, ignored)
			SELECT $1, r, b, s, e, l, p, c, h, v, d, a, `+secretPath+`, i
			FROM unnest($2::text[], $3::bytea[], $4::int[], $5::int[], $6::int[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[])
				WITH ORDINALITY AS t(r, b, s, e, l, p, c, h, v, d, a, i, n)
			ORDER BY n
			ON CONFLICT DO NOTHING
			RETURNING rule_id, secret_hash, secret_path)
		SELECT count(*) FROM (SELECT DISTINCT rule_id, secret_hash, secret_path FROM ins) AS n
		WHERE NOT EXISTS (SELECT 1 FROM findings f WHERE f.scope_id = $1 AND f.rule_id = n.rule_id
			AND f.secret_hash = n.secret_hash AND f.secret_path = n.secret_path)`,
		scopeID, rule, blob, start, end, line, path, commit, hash, preview, decoded, archive, ignored).Scan(&secrets)
	return secrets, err
}

// secretPath is findings.secret_path of a row being inserted (columns h, p,
// a: hash, path, archive): a path-only rule's secret is the file it
// matched, in an archive the file in it; empty for a secret with a hash. A
// plain column the application writes, not a generated one, so that
// changing it never rewrites the table (migration 00010).
const secretPath = `CASE WHEN h <> '' THEN '' WHEN a = '' THEN p ELSE p || '!' || a END`

// FinalizeInput is a finalize: the last data ops and the watermarks of the
// refs the run walked to their tips.
type FinalizeInput struct {
	Lease   shard.Lease
	ScopeID int64
	Data    DataOps
	// Complete: nothing skipped, every ref walked to its tip. Covered:
	// every ref walked to its tip (see shard.Receipt).
	Complete, Covered bool
	// Watermarks are the refs walked to their tips, each at its tip: all
	// of them when Covered, those the run finished when its time ran out,
	// none when the walk met missing commits or trees (what lies below
	// them is unknown). What the run could not read is in its holes.
	Watermarks map[string]string
	// Stats are the run's counts; Findings counts new secrets of the
	// whole run (as WriteData does), this batch's included by Finalize.
	Stats shard.Counts
	// Presence, only with Covered, is where the scope's findings stand at
	// the run's tips (see Presence); nil leaves the last one.
	Presence *Presence
}

// Finalize is inner durability: in one transaction, the fence check, the
// data ops, the watermark ops and the receipt, which counts the scope's
// holes after the run. A retried finalize of the same fence returns the
// receipt already written.
func (s *Store) Finalize(ctx context.Context, in FinalizeInput) (shard.Receipt, error) {
	var r shard.Receipt
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if done, err := receiptOf(ctx, tx, in.Lease); err != nil || done != nil {
			if done != nil {
				r = *done
			}
			return err
		}
		if err := checkLease(ctx, tx, in.Lease); err != nil {
			return err
		}
		n, err := writeData(ctx, tx, in.ScopeID, in.Data)
		if err != nil {
			return err
		}
		if len(in.Watermarks) > 0 {
			// In key order: each row goes after the one before in the
			// primary key's index, not at a random place in it.
			refs := make([]string, 0, len(in.Watermarks))
			for ref := range in.Watermarks {
				refs = append(refs, ref)
			}
			sort.Strings(refs)
			commits := make([]string, 0, len(refs))
			for _, ref := range refs {
				commits = append(commits, in.Watermarks[ref])
			}
			if _, err := tx.Exec(ctx, `INSERT INTO shard_watermarks (scope_id, ref, commit_id)
				SELECT $1, r, c FROM unnest($2::text[], $3::text[]) AS t(r, c)
				ON CONFLICT (scope_id, ref) DO UPDATE SET commit_id = excluded.commit_id`, in.ScopeID, refs, commits); err != nil {
				return err
			}
		}
		if (in.Complete || in.Covered) && in.Presence != nil {
			if err := writePresence(ctx, tx, in.ScopeID, *in.Presence); err != nil {
				return err
			}
		}
		r.Counts = in.Stats
		r.ShardID, r.ScopeID, r.Fence = in.Lease.ShardID, in.ScopeID, in.Lease.Fence
		r.Complete, r.Covered = in.Complete, in.Complete || in.Covered
		r.Findings += n
		if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT lost), count(*) FILTER (WHERE lost)
			FROM shard_holes WHERE scope_id = $1`, in.ScopeID).Scan(&r.Holes, &r.Lost); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO shard_receipts (shard_id, scope_id, fence, complete, commits, blobs_scanned,
				bytes_scanned, blobs_skipped, findings, covered, holes, lost)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id`,
			r.ShardID, r.ScopeID, r.Fence, r.Complete, r.Commits, r.BlobsScanned, r.BytesScanned, r.BlobsSkipped, r.Findings,
			r.Covered, r.Holes, r.Lost).Scan(&r.ID)
	})
	return r, err
}

const receiptColumns = `id, shard_id, scope_id, fence, complete, commits, blobs_scanned, bytes_scanned, blobs_skipped, findings,
	covered, holes, lost`

func scanReceipt(row pgx.Row) (*shard.Receipt, error) {
	var r shard.Receipt
	err := row.Scan(&r.ID, &r.ShardID, &r.ScopeID, &r.Fence, &r.Complete, &r.Commits, &r.BlobsScanned,
		&r.BytesScanned, &r.BlobsSkipped, &r.Findings, &r.Covered, &r.Holes, &r.Lost)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &r, err
}

func receiptOf(ctx context.Context, tx pgx.Tx, l shard.Lease) (*shard.Receipt, error) {
	return scanReceipt(tx.QueryRow(ctx, `SELECT `+receiptColumns+` FROM shard_receipts WHERE shard_id = $1 AND fence = $2`,
		l.ShardID, l.Fence))
}

// ReceiptByID returns a receipt or nil.
func (s *Store) ReceiptByID(ctx context.Context, id int64) (*shard.Receipt, error) {
	return scanReceipt(s.pool.QueryRow(ctx, `SELECT `+receiptColumns+` FROM shard_receipts WHERE id = $1`, id))
}

// Checkpoint is outer durability: it advances the shard's frontier to a
// receipt of the current fence (never to one of an older fence, never
// without one), then marks the shard Done after a run that settled it
// (shard.Receipt.Settled) or leaves it Active for the next run to continue,
// and releases the lease.
func (s *Store) Checkpoint(ctx context.Context, l shard.Lease, receiptID int64) (shard.Status, error) {
	var status shard.Status
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current, currentFence int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(s.checkpoint_receipt_id, 0), coalesce(r.fence, 0), s.status
			FROM shards s LEFT JOIN shard_receipts r ON r.id = s.checkpoint_receipt_id WHERE s.id = $1 FOR UPDATE OF s`,
			l.ShardID).Scan(&current, &currentFence, &status); err != nil {
			return err
		}
		if current == receiptID && currentFence == l.Fence {
			return nil // a retried checkpoint that already committed
		}
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		var r shard.Receipt
		err := tx.QueryRow(ctx, `SELECT complete, covered, holes FROM shard_receipts WHERE id = $1 AND shard_id = $2 AND fence = $3`,
			receiptID, l.ShardID, l.Fence).Scan(&r.Complete, &r.Covered, &r.Holes)
		if errors.Is(err, pgx.ErrNoRows) {
			return errclass.StaleOwnerf("shard %d: receipt %d is not a receipt of fence %d", l.ShardID, receiptID, l.Fence)
		}
		if err != nil {
			return err
		}
		status = shard.Active
		if r.Settled() {
			status = shard.Done
		}
		_, err = tx.Exec(ctx, `UPDATE shards SET checkpoint_receipt_id = $2, status = $3, owner = NULL, lease_deadline = NULL,
			updated_at = now() WHERE id = $1`, l.ShardID, receiptID, status)
		return err
	})
	return status, err
}

// Park sets a shard aside until something external changes.
func (s *Store) Park(ctx context.Context, l shard.Lease, reason string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var status shard.Status
		var fence int64
		if err := tx.QueryRow(ctx, `SELECT status, fence FROM shards WHERE id = $1 FOR UPDATE`, l.ShardID).Scan(&status, &fence); err != nil {
			return err
		}
		if status == shard.Parked && fence == l.Fence {
			return nil // a retried park that already committed
		}
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE shards SET status = 'Parked', park_reason = $2, owner = NULL, lease_deadline = NULL,
			parked_at = now(), updated_at = now() WHERE id = $1`, l.ShardID, reason)
		return err
	})
}

// Findings lists a shard's findings under its newest scope (rule set).
func (s *Store) Findings(ctx context.Context, shardID int64, limit int) ([]Finding, error) {
	rows, err := s.pool.Query(ctx, `SELECT rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview, decoded, archive
		FROM findings WHERE scope_id = (SELECT id FROM scan_scopes WHERE shard_id = $1 ORDER BY id DESC LIMIT 1)
		ORDER BY path, archive, line, start_offset, rule_id LIMIT $2`, shardID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Finding, error) {
		var f Finding
		err := row.Scan(&f.RuleID, &f.Blob, &f.Start, &f.End, &f.Line, &f.Path, &f.Commit, &f.SecretHash, &f.Preview, &f.Decoded, &f.Archive)
		f.BlobHex = fmt.Sprintf("%x", f.Blob)
		return f, err
	})
}
