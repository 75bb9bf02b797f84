// Where a test goes, and in which package (the rule for the root's tests):
//
//   - External by default: NAME_test.go is package resilient_test and uses
//     only the exported API, as a user's code does.
//   - Internal only when a test needs unexported state (a host's tokens,
//     the evidence, classify's verdict, a key's time): those tests go in
//     NAME_internal_test.go, package resilient. The file name says the
//     package.
//   - NAME is the source file whose concept the test is about: settle.go's
//     tests in settle_test.go, gate.go's in gate_test.go; NAME_PART_test.go
//     for a part of a concept (gate_admission, gate_pushback, evidence_guard,
//     hedge_harm, options_zerovalues). Properties of the whole Transport
//     have files named for the property: neverworse, harm, compat,
//     compat_nethttp, crash. Examples go in example_*_test.go, benchmarks
//     in *_bench_test.go.
//   - One scripted base transport and one set of request builders for all,
//     usable from both packages: internal/stubtest (Stub with its steps
//     Reply, ReplyDeduping, ReplyBody, Fail and Deduping; Post and Get).
//     This file holds only what the external tests share beyond that.

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
