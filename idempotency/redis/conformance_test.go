package redis_test

import (
	"testing"

	"github.com/resilienthttp/resilient/idempotency/idempotencytest"
)

// TestConformance runs the idempotency package's conformance suite against
// the Redis Store on a real redis-server (append-only file, fsync always).
// The Store is not atomic with effects: the suite checks that a failure is
// stored and replayed, never run twice.
func TestConformance(t *testing.T) {
	_, c := startRedis(t)
	idempotencytest.Run(t, func(t testing.TB) idempotencytest.Env {
		return idempotencytest.MemoryEnv(newStore(t, c))
	})
}
