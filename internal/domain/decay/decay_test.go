package decay

import (
	"testing"
	"time"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *time.Time { t := now.Add(-d); return &t }

const day = 24 * time.Hour

func TestInterval(t *testing.T) {
	tests := []struct {
		name   string
		viewed *time.Time
		want   time.Duration
		ok     bool
	}{
		{"just now", ago(0), 6 * time.Hour, true},
		{"7 days 23 hours is 7 whole days", ago(7*day + 23*time.Hour), 6 * time.Hour, true},
		{"8 days", ago(8 * day), 12 * time.Hour, true},
		{"14 days", ago(14 * day), 12 * time.Hour, true},
		{"15 days", ago(15 * day), 24 * time.Hour, true},
		{"30 days", ago(30 * day), 24 * time.Hour, true},
		{"31 days", ago(31 * day), 3 * day, true},
		{"60 days", ago(60 * day), 3 * day, true},
		{"61 days", ago(61 * day), 7 * day, true},
		{"90 days", ago(90 * day), 7 * day, true},
		{"90 days 23 hours", ago(90*day + 23*time.Hour), 7 * day, true},
		{"91 days", ago(91 * day), 0, false},
		{"a view in the future", ago(-time.Minute), 0, false},
		{"never viewed", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Default.Interval(tt.viewed, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Interval() = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name   string
		c      Candidate
		due    bool
		reason Reason
	}{
		{"no completed collection yet", Candidate{LastViewed: ago(day)}, true, NeverDone},
		{"hot, refreshed 5h ago", Candidate{LastViewed: ago(day), LastCompleted: ago(5 * time.Hour)}, false, NotYet},
		{"hot, refreshed 6h ago", Candidate{LastViewed: ago(day), LastCompleted: ago(6 * time.Hour)}, true, Due},
		{"hot, checked unchanged 1h ago", Candidate{LastViewed: ago(day), LastCompleted: ago(9 * time.Hour), LastChecked: ago(time.Hour)}, false, NotYet},
		{"7d23h idle, refreshed 7h ago", Candidate{LastViewed: ago(7*day + 23*time.Hour), LastCompleted: ago(7 * time.Hour)}, true, Due},
		{"8d idle, refreshed 7h ago", Candidate{LastViewed: ago(8 * day), LastCompleted: ago(7 * time.Hour)}, false, NotYet},
		{"90d idle, refreshed 8d ago", Candidate{LastViewed: ago(90 * day), LastCompleted: ago(8 * day)}, true, Due},
		{"91d idle", Candidate{LastViewed: ago(91 * day), LastCompleted: ago(30 * day)}, false, Idle},
		{"future view", Candidate{LastViewed: ago(-day), LastCompleted: ago(30 * day)}, false, FutureView},
		{"never viewed", Candidate{LastCompleted: ago(30 * day)}, false, NeverViewed},
		{"four failures", Candidate{LastViewed: ago(day), ConsecutiveFailures: 4}, true, NeverDone},
		{"five failures", Candidate{LastViewed: ago(day), ConsecutiveFailures: 5}, false, TooManyFails},
		// Events arriving: 4 intervals (24h for a hot one), until they stop.
		{"hot, events, refreshed 23h ago", Candidate{LastViewed: ago(day), LastCompleted: ago(23 * time.Hour), LastEvent: ago(2 * day)}, false, NotYet},
		{"hot, events, refreshed 24h ago", Candidate{LastViewed: ago(day), LastCompleted: ago(24 * time.Hour), LastEvent: ago(2 * day)}, true, Due},
		{"hot, events stopped 8d ago", Candidate{LastViewed: ago(day), LastCompleted: ago(6 * time.Hour), LastEvent: ago(8 * day)}, true, Due},
		{"hot, an event in the future", Candidate{LastViewed: ago(day), LastCompleted: ago(6 * time.Hour), LastEvent: ago(-day)}, true, Due},
		{"events, never completed", Candidate{LastViewed: ago(day), LastEvent: ago(time.Hour)}, true, NeverDone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, reason := Default.Decide(tt.c, now)
			if due != tt.due || reason != tt.reason {
				t.Errorf("Decide() = %v, %q; want %v, %q", due, reason, tt.due, tt.reason)
			}
		})
	}
}

func TestParse(t *testing.T) {
	got, err := Parse(" 7d=6h, 14d=12h,30d=24h,60d=3d,90d=7d ")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != Default.String() {
		t.Fatalf("Parse = %s, want %s", got, Default)
	}
	if Default.Horizon() != 91*day {
		t.Errorf("Horizon = %v", Default.Horizon())
	}
	for _, bad := range []string{"", "7d", "x=6h", "7d=0h", "7d=soon", "14d=6h,7d=12h", "-1d=6h"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
