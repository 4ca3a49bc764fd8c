package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/activities"
)

// describer answers DescribeTaskQueue from a script, counting the calls.
type describer struct {
	client.Client
	answers []func() (*workflowservice.DescribeTaskQueueResponse, error)
	calls   int
}

func (d *describer) DescribeTaskQueue(context.Context, string, enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	a := d.answers[min(d.calls, len(d.answers)-1)]
	d.calls++
	return a()
}

func polled() (*workflowservice.DescribeTaskQueueResponse, error) {
	return &workflowservice.DescribeTaskQueueResponse{Pollers: []*taskqueuepb.PollerInfo{{Identity: "w"}}}, nil
}
func unpolled() (*workflowservice.DescribeTaskQueueResponse, error) {
	return &workflowservice.DescribeTaskQueueResponse{}, nil
}
func failing(err error) func() (*workflowservice.DescribeTaskQueueResponse, error) {
	return func() (*workflowservice.DescribeTaskQueueResponse, error) { return nil, err }
}

// The poller check asks Temporal once per TTL for a polled queue, every
// time for an unpolled one (a worker just started is given its
// repositories as soon as its poll is seen), says it cannot tell when
// Temporal will not describe queues, and reports other errors.
func TestPollerCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []func() (*workflowservice.DescribeTaskQueueResponse, error)
		after   time.Duration // between the two questions
		polled  []bool
		known   bool
		err     bool
		calls   int
	}{
		{name: "a yes is remembered", answers: script(polled, unpolled), after: 5 * time.Second, polled: []bool{true, true}, known: true, calls: 1},
		{name: "a yes expires", answers: script(polled, unpolled), after: 20 * time.Second, polled: []bool{true, false}, known: true, calls: 2},
		{name: "a no is asked again", answers: script(unpolled, polled), after: time.Second, polled: []bool{false, true}, known: true, calls: 2},
		{name: "no right to describe", answers: script(failing(serviceerror.NewPermissionDenied("no", ""))), polled: []bool{false, false}, calls: 2},
		{name: "Temporal fails", answers: script(failing(errors.New("unavailable"))), polled: []bool{false, false}, err: true, calls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &describer{answers: tc.answers}
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			p := &activities.PollerCheck{Client: d, TTL: 15 * time.Second, Now: func() time.Time { return now }}
			for i, want := range tc.polled {
				got, known, err := p.Polled(context.Background(), "gitfleet:git:w1")
				if got != want || known != tc.known || (err != nil) != tc.err {
					t.Errorf("question %d: polled %t known %t err %v; want %t %t, error %t", i+1, got, known, err, want, tc.known, tc.err)
				}
				now = now.Add(tc.after)
			}
			if d.calls != tc.calls {
				t.Errorf("asked Temporal %d times, want %d", d.calls, tc.calls)
			}
		})
	}
}

// script lists the answers, in order (the last one repeats).
func script(a ...func() (*workflowservice.DescribeTaskQueueResponse, error)) []func() (*workflowservice.DescribeTaskQueueResponse, error) {
	return a
}
