package redelivery

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	attempts := []Attempt{
		{ID: 1, GUID: "ok", DeliveredAt: ago(time.Hour), StatusCode: 202},
		{ID: 2, GUID: "down", DeliveredAt: ago(2 * time.Hour), StatusCode: 0},
		{ID: 3, GUID: "down-then-ok", DeliveredAt: ago(3 * time.Hour), StatusCode: 503},
		{ID: 4, GUID: "down-then-ok", DeliveredAt: ago(2 * time.Hour), StatusCode: 202},
		{ID: 5, GUID: "twice", DeliveredAt: ago(5 * time.Hour), StatusCode: 503},
		{ID: 6, GUID: "twice", DeliveredAt: ago(4 * time.Hour), StatusCode: 503},
		{ID: 7, GUID: "just-now", DeliveredAt: ago(10 * time.Second), StatusCode: 503},
		{ID: 8, GUID: "old", DeliveredAt: ago(Retention + time.Hour), StatusCode: 503},
		{ID: 20, GUID: "refused", DeliveredAt: ago(time.Hour), StatusCode: 401},
	}
	for i := range MaxAttempts - 1 {
		attempts = append(attempts, Attempt{ID: int64(10 + i), GUID: "refused", DeliveredAt: ago(time.Duration(i+2) * time.Hour), StatusCode: 401})
	}
	for _, tc := range []struct {
		limit int
		want  []int64 // attempts redelivered, oldest event first
	}{
		{10, []int64{6, 2}},
		{1, []int64{6}},
	} {
		p := Decide(attempts, now, time.Minute, tc.limit)
		var got []int64
		for _, a := range p.Redeliver {
			got = append(got, a.ID)
		}
		if len(got) != len(tc.want) || (len(got) > 0 && (got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1])) {
			t.Errorf("limit %d: redeliver %v, want %v", tc.limit, got, tc.want)
		}
		pending := 1 + 2 - len(tc.want)
		if p.Events != 7 || p.Delivered != 2 || p.Expired != 1 || p.GaveUp != 1 || p.Pending != pending {
			t.Errorf("limit %d: plan %+v, want 7 events, 2 delivered, 1 expired, 1 given up, %d pending", tc.limit, p, pending)
		}
	}
}
