package redis_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/idempotency/internal/servercrash"
	"github.com/resilienthttp/resilient/idempotency/redis"
	"github.com/resilienthttp/resilient/internal/redistest"
)

func TestMain(m *testing.M) {
	// Re-executed by TestServerCrashMatrix: a server on the Redis Store.
	servercrash.Main(openCrashServer)
	goleak.VerifyTestMain(m,
		// go-redis redials in a goroutine that notices Close at its next tick.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// durable is the persistence the Store asks of Redis.
var durable = []string{"--appendonly", "yes", "--appendfsync", "always"}

// startRedis starts a redis-server with the append-only file, fsync always,
// and returns a client, both closed when t ends.
func startRedis(t testing.TB, args ...string) (*redistest.Server, *goredis.Client) {
	t.Helper()
	srv := redistest.Start(t, redistest.Config{Args: append(append([]string(nil), durable...), args...)})
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return srv, c
}

var prefixes atomic.Int64

// newPrefix returns a prefix no other Store of this test binary uses.
func newPrefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// newStore returns a Store on c with a prefix of its own.
func newStore(t testing.TB, c goredis.UniversalClient, opts ...redis.Option) *redis.Store {
	t.Helper()
	s, err := redis.New(context.Background(), c, append([]redis.Option{redis.WithPrefix(newPrefix())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
