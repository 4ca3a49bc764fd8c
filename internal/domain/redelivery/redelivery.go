// Package redelivery decides which of a GitHub App's webhook deliveries
// to redeliver: GitHub records every attempt and redelivers nothing by
// itself, so a delivery that failed while gitfleet's receiver was down is
// lost unless someone asks for it again.
package redelivery

import (
	"sort"
	"time"
)

// An Attempt is one delivery attempt as the deliveries API lists it: one
// event (GUID) may have several, the first and its redeliveries.
type Attempt struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"deliveredAt"`
	StatusCode  int       `json:"statusCode"` // 0: no answer
	Event       string    `json:"event"`
}

// OK reports whether the receiver took the attempt (2xx).
func (a Attempt) OK() bool { return a.StatusCode >= 200 && a.StatusCode < 300 }

// Retention is how long GitHub keeps deliveries and redelivers them.
const Retention = 3 * 24 * time.Hour

// MaxAttempts bounds the attempts of one event: past it the receiver is
// taken to refuse it for good (a secret that does not match, a body over
// its bound), and the sweep is left to find what it announced.
const MaxAttempts = 5

// Plan is what a recovery does with the attempts it listed.
type Plan struct {
	// Redeliver are the newest attempts of the events to deliver again,
	// oldest event first.
	Redeliver []Attempt
	// Events, Delivered, Pending and GaveUp count the events listed: taken
	// by the receiver; failed but too recent to tell from one in flight;
	// failed MaxAttempts times.
	Events, Delivered, Pending, GaveUp int
	// Expired: failed events past GitHub's retention, which it no longer
	// redelivers (the sweep catches what they announced).
	Expired int
}

// Decide plans a recovery at now: every event whose attempts all failed,
// last tried at least settle ago and within the retention, fewer than
// MaxAttempts times, is redelivered — at most limit of them, the oldest
// first (they are nearest to leaving the retention).
func Decide(attempts []Attempt, now time.Time, settle time.Duration, limit int) Plan {
	type event struct {
		newest   Attempt
		first    time.Time
		n        int
		received bool
	}
	events := map[string]*event{}
	for _, a := range attempts {
		e := events[a.GUID]
		if e == nil {
			e = &event{newest: a, first: a.DeliveredAt}
			events[a.GUID] = e
		}
		e.n++
		e.received = e.received || a.OK()
		if a.DeliveredAt.After(e.newest.DeliveredAt) || (a.DeliveredAt.Equal(e.newest.DeliveredAt) && a.ID > e.newest.ID) {
			e.newest = a
		}
		if a.DeliveredAt.Before(e.first) {
			e.first = a.DeliveredAt
		}
	}
	var p Plan
	var failed []*event
	for _, e := range events {
		p.Events++
		switch {
		case e.received:
			p.Delivered++
		case now.Sub(e.first) >= Retention:
			p.Expired++
		case e.n >= MaxAttempts:
			p.GaveUp++
		case now.Sub(e.newest.DeliveredAt) < settle:
			p.Pending++
		default:
			failed = append(failed, e)
		}
	}
	sort.Slice(failed, func(i, j int) bool {
		if !failed[i].first.Equal(failed[j].first) {
			return failed[i].first.Before(failed[j].first)
		}
		return failed[i].newest.GUID < failed[j].newest.GUID
	})
	for i, e := range failed {
		if i >= limit {
			p.Pending += len(failed) - limit
			break
		}
		p.Redeliver = append(p.Redeliver, e.newest)
	}
	return p
}
