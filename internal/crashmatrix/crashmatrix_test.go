package crashmatrix

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/bolt"
)

func TestMain(m *testing.M) {
	Main(openBolt)
	m.Run()
}

// openBolt opens the children's bolt Store, in the file path.
func openBolt(path string) (persist.Store, func(), error) {
	s, err := bolt.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

// TestSequence: the matrix passes on a bolt Store with no defect.
func TestSequence(t *testing.T) {
	Sequence(t, openBolt, filepath.Join(t.TempDir(), "keys.db"), 20, len(Phases))
}

// TestSequenceKilledBeforeItsLine: every child to be killed stops right
// after it completed an operation it resumed, before printing its line
// (the window a random kill lands in, about 1 run in 120). The parent reads
// the Store after the kill, finds the operation done with its effect, and
// the matrix passes; before it did, the next child issued the operation
// anew and the oracle failed.
func TestSequenceKilledBeforeItsLine(t *testing.T) {
	withChildEnv(t, windowEnv+"=1")
	Sequence(t, openBolt, filepath.Join(t.TempDir(), "keys.db"), 20, len(Phases))
}

// TestSequenceCatchesPlantedDefects: the oracle still fails on defects of
// the harness's own Store: an operation marked done before its effect, a
// pending record dropped.
func TestSequenceCatchesPlantedDefects(t *testing.T) {
	tests := []struct {
		defect string
		want   string
	}{
		{doneBeforeEffect, "marked done too early"},
		{dropPending, "issued anew"},
	}
	for _, tt := range tests {
		t.Run(tt.defect, func(t *testing.T) {
			withChildEnv(t, defectEnv+"="+tt.defect)
			r := &recorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				Sequence(r, openBolt, filepath.Join(t.TempDir(), "keys.db"), 20, len(Phases))
			}()
			<-done
			require.True(t, r.Failed(), "the oracle passed a planted defect")
			assert.Contains(t, r.log(), tt.want)
		})
	}
}

// withChildEnv adds env to the matrix children's environment until t ends.
func withChildEnv(t *testing.T, env ...string) {
	prev := childEnv
	childEnv = env
	t.Cleanup(func() { childEnv = prev })
}

// recorder is a testing.TB that records failures instead of reporting
// them: FailNow ends the calling goroutine, as testing's does.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, msg)
}

func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recorder) Fail()                             { r.fail("Fail") }
func (r *recorder) FailNow()                          { r.fail("FailNow"); runtime.Goexit() }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}
