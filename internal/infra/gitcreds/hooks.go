package gitcreds

import (
	"context"
	"errors"
	"time"

	"github.com/google/go-github/v66/github"

	"gitfleet/internal/domain/redelivery"
)

// HookDeliveries lists the attempts to deliver the App's webhook events
// delivered since since, newest first as the API pages them, reading at
// most maxPages pages of 100. page is called after each page (a heartbeat).
func (a *App) HookDeliveries(ctx context.Context, since time.Time, maxPages int, page func(n int)) ([]redelivery.Attempt, error) {
	c, err := a.asApp()
	if err != nil {
		return nil, err
	}
	var out []redelivery.Attempt
	opts := &github.ListCursorOptions{PerPage: 100}
	for n := 1; n <= maxPages; n++ {
		ds, resp, err := c.Apps.ListHookDeliveries(ctx, opts)
		if err != nil {
			return nil, err
		}
		older := false
		for _, d := range ds {
			at := d.GetDeliveredAt().Time
			if at.Before(since) {
				older = true
				continue
			}
			out = append(out, redelivery.Attempt{ID: d.GetID(), GUID: d.GetGUID(), DeliveredAt: at,
				StatusCode: d.GetStatusCode(), Event: d.GetEvent()})
		}
		page(n)
		if older || resp.Cursor == "" || len(ds) == 0 {
			break
		}
		opts.Cursor = resp.Cursor
	}
	return out, nil
}

// Redeliver asks GitHub to deliver an attempt's event again.
func (a *App) Redeliver(ctx context.Context, attemptID int64) error {
	c, err := a.asApp()
	if err != nil {
		return err
	}
	_, _, err = c.Apps.RedeliverHookDelivery(ctx, attemptID)
	var accepted *github.AcceptedError // GitHub answers 202: queued
	if errors.As(err, &accepted) {
		return nil
	}
	return err
}
