package e2e

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/internal/crashmatrix"
)

func TestMain(m *testing.M) {
	// Re-executed by TestCrashMatrix as the client process.
	crashmatrix.Main(openBolt)
	goleak.VerifyTestMain(m)
}
