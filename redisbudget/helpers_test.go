package redisbudget_test

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/internal/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// Re-executed by the tests with several processes.
		os.Exit(child())
	}
	// After dials fail (Redis killed), go-redis redials in a goroutine that
	// notices the client's Close only at its next one-second tick.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// roundTrips is a go-redis hook that counts round trips: each command sent
// alone and each pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

var _ = net.JoinHostPort

// newClient returns a client of addr that counts its round trips in rt (if
// not nil), closed when t ends. ctxTimeout sets ContextTimeoutEnabled: the
// Fleet bounds its calls either way.
func newClient(t testing.TB, addr string, rt *roundTrips, ctxTimeout bool) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: ctxTimeout})
	if rt != nil {
		c.AddHook(rt)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startServer starts a redis-server (internal/redistest) on a free loopback
// port, in a temporary directory, without persistence, and stops it when t
// ends. A missing redis-server fails the test: scripts/test installs it.
func startServer(t testing.TB) *redistest.Server {
	t.Helper()
	return redistest.Start(t, redistest.Config{})
}
