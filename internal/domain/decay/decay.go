package decay

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Band is one row of the decay table: repositories idle for at most
// MaxIdleDays whole days are refreshed every Interval.
type Band struct {
	MaxIdleDays int
	Interval    time.Duration
}

// Table is the decay table, ordered by MaxIdleDays. Repositories idle for
// longer than its last band are not refreshed.
type Table []Band

// Default is architecture §5's table.
var Default = Table{
	{MaxIdleDays: 7, Interval: 6 * time.Hour},
	{MaxIdleDays: 14, Interval: 12 * time.Hour},
	{MaxIdleDays: 30, Interval: 24 * time.Hour},
	{MaxIdleDays: 60, Interval: 3 * 24 * time.Hour},
	{MaxIdleDays: 90, Interval: 7 * 24 * time.Hour},
}

// MaxFailures is how many failed collections in a row take a repository out
// of automatic refresh (a success or a manual collect resets the count).
const MaxFailures = 5

// Horizon is how long after its last view a repository stays a candidate.
func (t Table) Horizon() time.Duration {
	if len(t) == 0 {
		return 0
	}
	return time.Duration(t[len(t)-1].MaxIdleDays+1) * 24 * time.Hour
}

// Interval is the refresh interval for a repository last viewed at
// lastViewed; ok is false when it is not refreshed at all (idle beyond the
// table, never viewed, or viewed in the future — a clock the table cannot
// trust).
func (t Table) Interval(lastViewed *time.Time, now time.Time) (time.Duration, bool) {
	if lastViewed == nil || lastViewed.After(now) {
		return 0, false
	}
	idleDays := int(now.Sub(*lastViewed) / (24 * time.Hour)) // whole days
	for _, b := range t {
		if idleDays <= b.MaxIdleDays {
			return b.Interval, true
		}
	}
	return 0, false
}

// Candidate is what the decision looks at.
type Candidate struct {
	LastViewed    *time.Time
	LastCompleted *time.Time
	// LastChecked is when a cheap change check last found nothing new.
	LastChecked *time.Time
	// LastEvent is when a webhook delivery last named the repository.
	LastEvent           *time.Time
	ConsecutiveFailures int
}

// A repository whose webhook events arrive has its pushes collected as
// they happen: the sweep is only the safety net for a delivery lost, and
// checks it EventedFactor times less often while its last event is at
// most EventsCover old. Past that its events have stopped (the webhook is
// off, the receiver down) and it is checked as any other.
const (
	EventsCover   = 7 * 24 * time.Hour
	EventedFactor = 4
)

// Reason explains a decision.
type Reason string

const (
	Due          Reason = "due"
	NeverDone    Reason = "never completed"
	NotYet       Reason = "refreshed recently"
	Idle         Reason = "not viewed recently"
	FutureView   Reason = "viewed in the future"
	NeverViewed  Reason = "never viewed"
	TooManyFails Reason = "too many failures"
)

// Decide says whether c is due at now: never completed, or at least one
// interval past its last completion (or its last unchanged check) — four
// while its webhook events arrive.
func (t Table) Decide(c Candidate, now time.Time) (bool, Reason) {
	switch {
	case c.ConsecutiveFailures >= MaxFailures:
		return false, TooManyFails
	case c.LastViewed == nil:
		return false, NeverViewed
	case c.LastViewed.After(now):
		return false, FutureView
	}
	interval, ok := t.Interval(c.LastViewed, now)
	if !ok {
		return false, Idle
	}
	if c.LastCompleted == nil {
		return true, NeverDone
	}
	if c.LastEvent != nil && !c.LastEvent.After(now) && now.Sub(*c.LastEvent) <= EventsCover {
		interval *= EventedFactor
	}
	last := *c.LastCompleted
	if c.LastChecked != nil && c.LastChecked.After(last) {
		last = *c.LastChecked
	}
	if now.Before(last.Add(interval)) {
		return false, NotYet
	}
	return true, Due
}

// Parse reads a table written as "7d=6h,14d=12h,30d=24h,60d=3d,90d=7d":
// idle days, then the interval (Go durations, plus a "d" suffix for days).
func Parse(s string) (Table, error) {
	var t Table
	for _, part := range strings.Split(s, ",") {
		days, interval, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("decay table: %q is not <days>d=<interval>", part)
		}
		d, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(days), "d"))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("decay table: %q: idle days must be a whole number", part)
		}
		iv, err := parseInterval(strings.TrimSpace(interval))
		if err != nil || iv <= 0 {
			return nil, fmt.Errorf("decay table: %q: bad interval", part)
		}
		t = append(t, Band{MaxIdleDays: d, Interval: iv})
	}
	if len(t) == 0 {
		return nil, errors.New("decay table is empty")
	}
	if !slices.IsSortedFunc(t, func(a, b Band) int { return a.MaxIdleDays - b.MaxIdleDays }) {
		return nil, errors.New("decay table: bands must be in increasing order of idle days")
	}
	return t, nil
}

func parseInterval(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		return time.Duration(n * 24 * float64(time.Hour)), err
	}
	return time.ParseDuration(s)
}

// String writes the table in Parse's format.
func (t Table) String() string {
	parts := make([]string, len(t))
	for i, b := range t {
		iv := b.Interval.String()
		if b.Interval%(24*time.Hour) == 0 {
			iv = strconv.Itoa(int(b.Interval/(24*time.Hour))) + "d"
		}
		parts[i] = fmt.Sprintf("%dd=%s", b.MaxIdleDays, iv)
	}
	return strings.Join(parts, ",")
}
