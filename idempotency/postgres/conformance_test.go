package postgres_test

import (
	"testing"

	"github.com/resilienthttp/resilient/idempotency/idempotencytest"
)

func TestConformancePgx(t *testing.T) {
	pool := newPool(t, 3)
	idempotencytest.Run(t, func(t testing.TB) idempotencytest.Env { return pgxEnv(t, pool) })
}

func TestConformanceSQL(t *testing.T) {
	pool := newPool(t, 3)
	idempotencytest.Run(t, func(t testing.TB) idempotencytest.Env { return sqlEnv(t, pool) })
}
