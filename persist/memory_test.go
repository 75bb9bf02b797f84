package persist_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/persisttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMemoryConformance(t *testing.T) {
	persisttest.Run(t, func(*testing.T) persist.Store { return persist.NewMemory() })
}

func TestMemoryZeroValueConformance(t *testing.T) {
	persisttest.Run(t, func(*testing.T) persist.Store { return new(persist.Memory) })
}

func BenchmarkMemoryClaim(b *testing.B) {
	persisttest.Benchmark(b, func(*testing.B) persist.Store { return persist.NewMemory() })
}
