//go:build !simbugs

package resilient

// simbugs is false in the normal build: every bug hook (if simbugs && ...)
// compiles away. The simulator in sim/ builds with -tags simbugs to check
// that it catches the bugs the hooks inject.
const simbugs = false

// bugActive is never called in the normal build.
func bugActive(string) bool { return false }
