// Where a test goes, and in which package:
//
//   - One file per concept, named after the file it tests: settle.go's
//     tests in settle_test.go, gate.go's in gate_test.go (gate_*_test.go for
//     a part of the gate too big for one file). Examples go in
//     example_*_test.go, benchmarks in *_bench_test.go.
//   - External (package resilient_test) by default: a test that uses only
//     the exported API reads as a user's code and cannot lean on internals.
//   - Internal (package resilient) only when the test needs unexported
//     state (a host's tokens, the evidence, classify's verdict); the file
//     says which at its top.
//   - One request builder and one scripted base transport for all:
//     internal/stubtest's Post and Stub (with Reply, ReplyDeduping,
//     ReplyBody, Fail and Deduping for its steps), usable from both
//     packages.

package resilient_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// Re-executed by TestCrashResume as the client process.
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}
