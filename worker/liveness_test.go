package main

import (
	"context"
	"errors"
	"testing"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

// The heartbeat's poll condition, from the outcomes of the polls of the
// worker's own queue as they pass through the client's connection: a
// failed poll withholds the beat until a poll answers or one sent since
// waits for its answer; a worker stopping its pollers, polls of other
// queues and other calls do not count.
func TestPollWatch(t *testing.T) {
	const own = "gitfleet:git:w1"
	type step struct {
		queue string
		err   error
		ctx   bool // the caller's context ended (the worker stopping)
		other bool // not a poll
	}
	failed := errors.New("unavailable")
	for _, tc := range []struct {
		name        string
		steps       []step
		inflight    bool // a poll of the own queue sent after the steps, not answered
		wantFailing bool
	}{
		{name: "no poll yet"},
		{name: "a poll answered", steps: []step{{queue: own}}},
		{name: "a poll failed", steps: []step{{queue: own}, {queue: own, err: failed}}, wantFailing: true},
		{name: "failed, then answered", steps: []step{{queue: own, err: failed}, {queue: own}}},
		{name: "failed, a poll sent since waits", steps: []step{{queue: own, err: failed}}, inflight: true},
		{name: "the worker stopping its pollers", steps: []step{{queue: own, err: context.Canceled, ctx: true}}},
		{name: "another queue's polls fail", steps: []step{{queue: "gitfleet:git", err: failed}}},
		{name: "other calls fail", steps: []step{{queue: own, err: failed, other: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPollWatch(own)
			call := p.interceptor()
			for _, s := range tc.steps {
				ctx, cancel := context.WithCancel(context.Background())
				if s.ctx {
					cancel()
				}
				var req any = &workflowservice.PollActivityTaskQueueRequest{TaskQueue: &taskqueuepb.TaskQueue{Name: s.queue}}
				if s.other {
					req = &workflowservice.DescribeTaskQueueRequest{TaskQueue: &taskqueuepb.TaskQueue{Name: s.queue}}
				}
				got := call(ctx, "/poll", req, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
					return s.err
				})
				cancel()
				if got != s.err {
					t.Fatalf("the interceptor returned %v, want the call's %v", got, s.err)
				}
			}
			if tc.inflight {
				sent, answer := make(chan struct{}), make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					req := &workflowservice.PollActivityTaskQueueRequest{TaskQueue: &taskqueuepb.TaskQueue{Name: own}}
					_ = call(context.Background(), "/poll", req, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
						close(sent)
						<-answer
						return nil
					})
				}()
				<-sent
				defer func() { close(answer); <-done }()
			}
			if err := p.failing(); (err != nil) != tc.wantFailing {
				t.Fatalf("failing = %v, want failing %t", err, tc.wantFailing)
			}
		})
	}
}
