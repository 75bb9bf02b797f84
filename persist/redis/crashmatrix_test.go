package redis_test

import (
	"fmt"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/internal/crashmatrix"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/redis"
)

// openMatrixStore opens a crash child's Redis Store from "ADDR PREFIX".
func openMatrixStore(arg string) (persist.Store, func(), error) {
	addr, prefix, ok := strings.Cut(arg, " ")
	if !ok {
		return nil, nil, fmt.Errorf("store %q: want ADDR PREFIX", arg)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	return redis.New(c, redis.WithPrefix(prefix)), func() { _ = c.Close() }, nil
}

// TestCrashMatrixWithRedis is the crash matrix of the durable Stores
// (internal/crashmatrix.EachPoint) with the Redis Store, at every kill
// point: after the claim and before sending, after the server committed,
// during the backoff before a retry (with and without an effect), each also
// in the second hop of an operation that goes through a 307 and one that
// goes through a 308 redirect, and at a random time. For each, a client
// process is killed with SIGKILL there, then a second process sharing the
// Redis Store resumes the pending operations (Store.Pending,
// ContextWithOperation) and issues the rest. The operation killed at a kill
// point is resumed (it was pending: not lost, not marked done by a redirect
// hop), every operation has exactly one effect under the key it was sent
// with, and nothing is left pending.
func TestCrashMatrixWithRedis(t *testing.T) {
	rs := startServer(t)
	crashmatrix.EachPoint(t, func(*testing.T) string { return rs.Addr + " " + newPrefix() })
}
