package store_test

import (
	"context"
	"testing"
	"time"

	"gitfleet/internal/infra/store"
)

// A codebase's uploads: the newest is what show prints, only the newest 20
// are kept, and the uploads sent for an installation in a window are
// counted with the oldest's time (the hourly bound).
func TestCodeScanningUploadRows(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cb := f.apply("acme", "api", "77", 0, "").CodebaseID
	other := f.apply("acme", "web", "78", 0, "").CodebaseID
	account := f.host + "/installation/1"
	start := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	for i := range 25 {
		sent := start.Add(time.Duration(i) * 5 * time.Minute)
		u := &store.CodeScanningUpload{CodebaseID: cb, Repository: f.host + "/acme/api", Account: account, Commit: "c",
			Ref: "refs/heads/main", Digest: "d", Open: i, State: store.UploadComplete, Attempt: 1, SarifID: "s", SentAt: &sent}
		if err := env.Store.RecordUpload(ctx, u); err != nil || u.ID == 0 {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	notSent := &store.CodeScanningUpload{CodebaseID: other, Repository: f.host + "/acme/web", State: store.UploadNotSent,
		Message: "the App lacks Code scanning alerts: write", Attempt: 1}
	if err := env.Store.RecordUpload(ctx, notSent); err != nil {
		t.Fatal(err)
	}
	last, err := env.Store.LatestUpload(ctx, cb)
	if err != nil || last == nil || last.Open != 24 {
		t.Fatalf("latest: %+v, %v", last, err)
	}
	var kept int
	if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM code_scanning_uploads WHERE codebase_id = $1`, cb).Scan(&kept); err != nil || kept != 20 {
		t.Errorf("kept %d rows (%v), want 20", kept, err)
	}
	if err := env.Store.SetUploadState(ctx, last.ID, store.UploadFailed, "bad"); err != nil {
		t.Fatal(err)
	}
	if u, _ := env.Store.Upload(ctx, last.ID); u == nil || u.State != store.UploadFailed || u.Message != "bad" {
		t.Errorf("after SetUploadState: %+v", u)
	}
	// Sent in the last hour of the 25 (every 5 minutes from 2 h ago): the
	// rows kept whose sent_at is within it.
	since := start.Add(24*5*time.Minute - time.Hour)
	n, oldest, err := env.Store.UploadsSentSince(ctx, account, since)
	if err != nil || n != 13 || oldest == nil || !oldest.Equal(since) {
		t.Errorf("sent since %v: %d, oldest %v, %v; want 13 from %v", since, n, oldest, err, since)
	}
	if n, _, _ := env.Store.UploadsSentSince(ctx, f.host+"/installation/2", since); n != 0 {
		t.Errorf("another installation: %d", n)
	}
	if got, _ := env.Store.LatestUpload(ctx, other); got == nil || got.State != store.UploadNotSent || got.SentAt != nil {
		t.Errorf("not sent: %+v", got)
	}
}
