package codescan

import (
	"testing"
	"time"
)

func TestDigestIgnoresOrderAndCounts(t *testing.T) {
	var a, b Digest
	a.Add("f1", "aws", "a.env", 3, "", false)
	a.Add("f2", "aws", "b.env", 1, "", true)
	b.Add("f2", "aws", "b.env", 1, "", true)
	b.Add("f1", "aws", "a.env", 3, "", false)
	if a.Sum() != b.Sum() || a.Open != 1 || a.Dismissed != 1 {
		t.Errorf("same results: %s %s, open %d dismissed %d", a.Sum(), b.Sum(), a.Open, a.Dismissed)
	}
	var c Digest
	c.Add("f1", "aws", "a.env", 3, "", false)
	c.Add("f2", "aws", "b.env", 1, "", false) // reopened
	if c.Sum() == a.Sum() {
		t.Error("a reopened secret leaves the digest unchanged")
	}
	var v Digest
	v.Add("f1", "aws", "a.env", 3, "valid", false) // found valid since: more severe
	v.Add("f2", "aws", "b.env", 1, "", true)
	if v.Sum() == a.Sum() {
		t.Error("a validity found since leaves the digest unchanged")
	}
}

func TestDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		last    *Last
		digest  string
		results int
		want    bool
	}{
		{"nothing, never", nil, "d", 0, false},
		{"results, never", nil, "d", 2, true},
		{"same results, complete", &Last{Digest: "d", State: Complete, At: now.Add(-time.Minute)}, "d", 2, false},
		{"same results, failed after retries", &Last{Digest: "d", State: Failed, At: now.Add(-time.Minute)}, "d", 2, false},
		{"changed", &Last{Digest: "d", State: Complete}, "e", 2, true},
		{"all resolved since", &Last{Digest: "d", State: Complete}, "e", 0, true},
		{"not sent, recently", &Last{Digest: "d", State: NotSent, At: now.Add(-time.Minute)}, "d", 2, false},
		{"not sent, an hour ago", &Last{Digest: "d", State: NotSent, At: now.Add(-RecheckNotSent)}, "d", 2, true},
	} {
		if got, why := Due(tc.last, tc.digest, tc.results, now); got != tc.want || why == "" {
			t.Errorf("%s: Due = %t (%q), want %t", tc.name, got, why, tc.want)
		}
	}
}

func TestPollDelayIsBounded(t *testing.T) {
	var total time.Duration
	for i := range MaxPolls {
		d := PollDelay(i)
		if d <= 0 || d > 30*time.Second {
			t.Errorf("PollDelay(%d) = %v", i, d)
		}
		total += d
	}
	if total > 10*time.Minute {
		t.Errorf("the polls wait %v in all", total)
	}
}
