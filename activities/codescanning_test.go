package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"gitfleet/activities"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/store"
)

// Code scanning uploads are bounded per installation: past PerHour sent
// in the last hour (all workers: counted in the database), an upload is
// Retryable with the wait until the oldest of them is an hour old; another
// installation, or a higher bound, is not held back.
func TestCodeScanningUploadsBoundedPerInstallation(t *testing.T) {
	ctx := context.Background()
	host := "bound.example.com"
	cb := dueReposOf(t, host, "acme", true, "api")[0].CodebaseID
	now := time.Now().UTC().Truncate(time.Second)
	account := host + "/installation/7"
	for _, ago := range []time.Duration{90 * time.Minute, 50 * time.Minute, 30 * time.Minute, 10 * time.Minute} {
		sent := now.Add(-ago)
		if err := env.Store.RecordUpload(ctx, &store.CodeScanningUpload{CodebaseID: cb, Repository: host + "/acme/api", Account: account,
			State: store.UploadComplete, Attempt: 1, SentAt: &sent}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		perHour int
		account string
		wait    time.Duration // 0: not held back
	}{
		{"at the bound", 3, account, 10 * time.Minute},
		{"under the bound", 4, account, 0},
		{"another installation", 3, host + "/installation/8", 0},
	} {
		c := &activities.CodeScanning{Store: env.Store, PerHour: tc.perHour, Now: func() time.Time { return now }}
		err := activities.WithinBound(ctx, c, tc.account)
		var app *temporal.ApplicationError
		switch {
		case tc.wait == 0 && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.wait != 0 && (!errors.As(err, &app) || app.Type() != string(errclass.Retryable) || app.NextRetryDelay() != tc.wait):
			t.Errorf("%s: %v, want Retryable after %v", tc.name, err, tc.wait)
		}
	}
}
