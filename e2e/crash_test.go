package e2e

import (
	"path/filepath"
	"testing"

	"github.com/resilienthttp/resilient/internal/crashmatrix"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/bolt"
)

// openBolt opens the crash children's bolt Store, in the file path.
func openBolt(path string) (persist.Store, func(), error) {
	s, err := bolt.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

// TestCrashMatrix is the crash matrix (internal/crashmatrix.Sequence) on
// one bolt file: the client process is killed with SIGKILL at every kill
// point once, in a random order, then at points drawn at random, and
// restarted on the same file each time. Each restarted process resumes the
// pending operations with their keys (Store.Pending, ContextWithOperation),
// then goes on. An operation killed at a kill point is resumed by the next
// process (it was pending, not lost nor marked done by a redirect), and at
// the end every operation has exactly one effect, under the key its Store
// holds, and nothing is pending.
func TestCrashMatrix(t *testing.T) {
	ops, maxKills := 36, 14
	if testing.Short() {
		ops, maxKills = 16, len(crashmatrix.Phases)
	}
	crashmatrix.Sequence(t, openBolt, filepath.Join(t.TempDir(), "keys.db"), ops, maxKills)
}
