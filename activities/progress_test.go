package activities

import (
	"testing"
	"time"
)

// A shard activity is alive while it moves, or while it waits on
// something outside it within the wait's bound; otherwise its heartbeats
// stop and Temporal ends the attempt.
func TestProgressSaysWhenAnActivityIsAlive(t *testing.T) {
	var p progress
	now := time.Now()
	alive := func(at time.Time) bool {
		_, ok := p.alive(at)
		return ok
	}
	steps := []struct {
		name string
		do   func()
		at   time.Time
		want bool
	}{
		{"nothing done yet", func() {}, now, false},
		{"a blob met", p.step, now, true},
		{"no step since", func() {}, now, false},
		{"a batch written", func() { p.add(3, 30, 1) }, now, true},
		{"stuck", func() {}, now.Add(time.Hour), false},
	}
	for _, s := range steps {
		s.do()
		if got := alive(s.at); got != s.want {
			t.Fatalf("%s: alive = %t, want %t", s.name, got, s.want)
		}
	}
	done := p.wait(time.Minute)
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{{time.Now(), true}, {time.Now().Add(30 * time.Second), true}, {time.Now().Add(2 * time.Minute), false}} {
		if got := alive(tt.at); got != tt.want {
			t.Fatalf("waiting, %s after it began: alive = %t, want %t", tt.at.Sub(now).Round(time.Second), got, tt.want)
		}
	}
	done()
	if !alive(time.Now()) {
		t.Fatal("the answer to a wait is a step forward")
	}
	if alive(time.Now()) {
		t.Fatal("alive after the wait ended and nothing moved")
	}
	if d, _ := p.alive(time.Now()); d["blobs"] != 3 || d["bytes"] != 30 || d["findings"] != 1 {
		t.Fatalf("reported %v", d)
	}

	// A longer wait inside a shorter one (a fetch while the scan loads its
	// state from the database) is alive for its own bound.
	outer := p.wait(time.Minute)
	inner := p.wait(time.Hour)
	if !alive(time.Now().Add(30 * time.Minute)) {
		t.Fatal("a fetch within its bound taken for stuck")
	}
	inner()
	outer()
	p.alive(time.Now())
	if alive(time.Now()) {
		t.Fatal("alive after every wait ended and nothing moved")
	}
}
