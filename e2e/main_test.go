package e2e

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// Re-executed by TestCrashMatrix as the client process.
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}
