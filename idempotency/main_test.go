package idempotency_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/internal/servercrash"
)

func TestMain(m *testing.M) {
	// Re-executed by TestServerCrashMatrix: a server on a MemoryStore.
	servercrash.Main(func(path string) (idempotency.Store, servercrash.Effect, func(), error) {
		effect, closeFile, err := servercrash.FileEffect(path)
		return idempotency.NewMemoryStore(), effect, closeFile, err
	})
	goleak.VerifyTestMain(m)
}
