//go:build simbugs

package resilient

import "os"

// simbugs is true under the simbugs build tag: the bug hooks are live, and
// the one named by the environment variable RESILIENT_SIMBUG is injected.
// Only the simulator (sim/, TestMutants) builds with this tag.
const simbugs = true

// bugActive reports whether the known bug name is injected: the
// environment variable RESILIENT_SIMBUG names it. The bugs:
//
//	newkey        a retry is sent under a new key (send.go)
//	redirectdone  a redirect answer is recorded Done in the Store (ledger.go)
//	unsaferesend  an unsafe request is re-sent without evidence (trust.go)
//	nofinish      the final Store Finish is skipped (operation.go)
//	sleeppast     a retry's wait ignores the deadline and the context (gate.go)
func bugActive(name string) bool { return os.Getenv("RESILIENT_SIMBUG") == name }
