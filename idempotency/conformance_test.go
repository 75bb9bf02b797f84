package idempotency_test

import (
	"testing"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/idempotencytest"
)

func TestConformanceMemory(t *testing.T) {
	idempotencytest.Run(t, func(testing.TB) idempotencytest.Env {
		return idempotencytest.MemoryEnv(idempotency.NewMemoryStore())
	})
}
