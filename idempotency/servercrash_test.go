package idempotency_test

import (
	"path/filepath"
	"testing"

	"github.com/resilienthttp/resilient/idempotency/internal/servercrash"
)

// TestServerCrashMatrix is the server crash matrix (internal/servercrash)
// on a MemoryStore: the server is killed before the handler, in it, after
// its effect, after the stored answer, and at random, and restarted with
// an empty store. Its promise: no duplicate within a life, nothing lost; a
// duplicate only for an operation whose server died after its effect.
// IDEMPOTENCY_CRASH_KILLS sets the number of kills (default 10).
func TestServerCrashMatrix(t *testing.T) {
	effects := filepath.Join(t.TempDir(), "effects")
	servercrash.Run(t, servercrash.Config{
		Name: "memory", Arg: effects, Promise: servercrash.Volatile, Kills: servercrash.Kills(t, 10),
		Effects: func(t *testing.T) map[string][]string { return servercrash.FileEffects(t, effects) },
	})
}
