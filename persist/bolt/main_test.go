package bolt

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperOpenEnv names the environment variable that turns the test binary
// into the child process of TestOpenLockedFileOtherProcess; its value is the
// file path.
const helperOpenEnv = "PERSIST_BOLT_TEST_OPEN"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperOpenEnv); path != "" {
		// Re-executed by TestOpenLockedFileOtherProcess.
		os.Exit(helperOpen(path))
	}
	goleak.VerifyTestMain(m)
}

// helperOpen opens the file held by the parent process and prints the error.
func helperOpen(path string) int {
	s, err := Open(path, WithLockTimeout(200*time.Millisecond))
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	fmt.Println("opened")
	_ = s.Close()
	return 0
}
