package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Code scanning upload states (code_scanning_uploads.state).
const (
	UploadPending  = "pending"
	UploadComplete = "complete"
	UploadFailed   = "failed"
	// UploadNotSent: nothing was sent; the message says why (no App, the
	// App lacks the permission).
	UploadNotSent = "not_sent"
)

// CodeScanningUpload is one upload of a repository's SARIF to code
// scanning, or the record that none was sent and why.
type CodeScanningUpload struct {
	ID         int64      `json:"id"`
	CodebaseID int64      `json:"codebaseId"`
	Repository string     `json:"repository"`
	Account    string     `json:"account,omitempty"`
	Commit     string     `json:"commit,omitempty"`
	Ref        string     `json:"ref,omitempty"`
	Digest     string     `json:"digest,omitempty"`
	Open       int        `json:"open"`
	Dismissed  int        `json:"dismissed"`
	SarifID    string     `json:"sarifId,omitempty"`
	State      string     `json:"state"`
	Attempt    int        `json:"attempt"`
	Message    string     `json:"message,omitempty"`
	SentAt     *time.Time `json:"sentAt,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}

const uploadColumns = `id, codebase_id, repository, account, commit_sha, ref, digest, open_results, dismissed, sarif_id, state, attempt,
	message, sent_at, created_at, updated_at`

func scanUpload(row pgx.Row) (*CodeScanningUpload, error) {
	var u CodeScanningUpload
	err := row.Scan(&u.ID, &u.CodebaseID, &u.Repository, &u.Account, &u.Commit, &u.Ref, &u.Digest, &u.Open, &u.Dismissed, &u.SarifID,
		&u.State, &u.Attempt, &u.Message, &u.SentAt, &u.CreatedAt, &u.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// keptUploads is how many rows of a codebase's uploads are kept: enough
// for show and for the retries of the last few.
const keptUploads = 20

// RecordUpload adds an upload row (its ID is set) and forgets the
// codebase's rows beyond the newest keptUploads.
func (s *Store) RecordUpload(ctx context.Context, u *CodeScanningUpload) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO code_scanning_uploads (codebase_id, repository, account, commit_sha, ref, digest, open_results,
			dismissed, sarif_id, state, attempt, message, sent_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			RETURNING id, created_at, updated_at`,
			u.CodebaseID, u.Repository, u.Account, u.Commit, u.Ref, u.Digest, u.Open, u.Dismissed, u.SarifID, u.State, u.Attempt, u.Message,
			u.SentAt).Scan(&u.ID, &u.CreatedAt, &u.UpdatedAt)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM code_scanning_uploads WHERE codebase_id = $1 AND id NOT IN (
			SELECT id FROM code_scanning_uploads WHERE codebase_id = $1 ORDER BY id DESC LIMIT $2)`, u.CodebaseID, keptUploads)
		return err
	})
}

// SetUploadState records an upload's processing state and message.
func (s *Store) SetUploadState(ctx context.Context, id int64, state, message string) error {
	_, err := s.pool.Exec(ctx, `UPDATE code_scanning_uploads SET state = $2, message = $3, updated_at = now() WHERE id = $1`, id, state, message)
	return err
}

// Upload is one upload row, nil when it is gone.
func (s *Store) Upload(ctx context.Context, id int64) (*CodeScanningUpload, error) {
	return scanUpload(s.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM code_scanning_uploads WHERE id = $1`, id))
}

// LatestUpload is a codebase's newest upload row, nil when there is none.
func (s *Store) LatestUpload(ctx context.Context, codebaseID int64) (*CodeScanningUpload, error) {
	return scanUpload(s.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM code_scanning_uploads WHERE codebase_id = $1
		ORDER BY id DESC LIMIT 1`, codebaseID))
}

// UploadsSentSince counts the uploads sent for an account (an App
// installation) since a time, and says when the oldest of them was sent.
func (s *Store) UploadsSentSince(ctx context.Context, account string, since time.Time) (int, *time.Time, error) {
	var n int
	var oldest *time.Time
	err := s.pool.QueryRow(ctx, `SELECT count(*), min(sent_at) FROM code_scanning_uploads WHERE account = $1 AND sent_at >= $2`,
		account, since).Scan(&n, &oldest)
	return n, oldest, err
}

// ForgetUploads deletes every upload record (`starter dev`: its forge,
// which held the uploads, starts empty).
func (s *Store) ForgetUploads(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM code_scanning_uploads`)
	return err
}
