package testenv

import (
	"context"
	"path"
	"sync"

	"google.golang.org/grpc"
)

// rpcCounter counts unary calls by method name ("RecordActivityTaskHeartbeat").
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[path.Base(method)]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// RPCs is how many calls to the Temporal frontend's method (its bare name,
// e.g. "RecordActivityTaskHeartbeat") Client and the workers built on it
// have made since the stack started. Heartbeats are billed actions that
// no history records: a benchmark counts them here, before and after.
func (e *Env) RPCs(method string) int64 {
	e.rpcs.mu.Lock()
	defer e.rpcs.mu.Unlock()
	return e.rpcs.n[method]
}
