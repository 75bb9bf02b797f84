package persist

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Memory is a Store that keeps its records in a map in process memory. Its
// records do not survive the process, so it gives resumable keys within one
// process only; use persist/bolt or persist/redis to survive a crash.
//
// Every method holds one mutex for its whole duration, which makes Claim
// atomic. A method checks its context before it starts and then runs to its
// end: nothing of a call outlives its return. Records are values: what Claim stores and what Pending returns are
// copies, never shared with the caller. Created is kept in UTC without its
// monotonic clock reading, as a durable store would return it.
//
// The zero value is an empty store ready to use; NewMemory returns one. A
// Memory is safe for concurrent use by multiple goroutines.
type Memory struct {
	mu   sync.Mutex
	recs map[string]Record // by Operation; guarded by mu; nil until the first Claim
}

// NewMemory returns an empty in-memory Store.
func NewMemory() *Memory {
	return &Memory{recs: make(map[string]Record)}
}

// Claim returns the record of candidate.Operation, storing candidate with
// State Pending if there is none. A zero candidate.Created is set to the
// current time. It returns an error if ctx is done, or if candidate has an
// empty Operation or Key or a negative Attempts.
func (m *Memory) Claim(ctx context.Context, candidate Record) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, fmt.Errorf("persist: claim: %w", err)
	}
	if err := checkCandidate(candidate); err != nil {
		return Record{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec, ok := m.recs[candidate.Operation]; ok {
		return rec, false, nil
	}
	if candidate.Created.IsZero() {
		candidate.Created = time.Now()
	}
	candidate.Created = candidate.Created.Round(0).UTC()
	candidate.State = Pending
	if m.recs == nil {
		m.recs = make(map[string]Record)
	}
	m.recs[candidate.Operation] = candidate
	return candidate, true, nil
}

// Finish sets the state and attempt count of op's record. It returns an error
// wrapping ErrNotFound if op has no record, and an error if ctx is done, state
// is neither Pending nor Done, or attempts is negative.
func (m *Memory) Finish(ctx context.Context, op string, state State, attempts int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist: finish: %w", err)
	}
	if err := checkFinish(state, attempts); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[op]
	if !ok {
		return fmt.Errorf("persist: finish %q: %w", op, ErrNotFound)
	}
	if rec.State != Done { // Done is final
		rec.State = state
	}
	rec.Attempts = attempts
	m.recs[op] = rec
	return nil
}

// Pending returns the records in state Pending, oldest Created first (ties
// in Operation order). It returns an error only if ctx is done.
func (m *Memory) Pending(ctx context.Context) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("persist: pending: %w", err)
	}
	m.mu.Lock()
	var out []Record
	for _, rec := range m.recs {
		if rec.State == Pending {
			out = append(out, rec)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, compareCreated)
	return out, nil
}

// Delete removes op's record, if any. It returns an error only if ctx is done.
func (m *Memory) Delete(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist: delete: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, op)
	return nil
}

// Expire deletes every record whose Created is before cutoff, in any state,
// and returns how many it deleted. It returns an error only if ctx is done.
func (m *Memory) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("persist: expire: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for op, rec := range m.recs {
		if rec.Created.Before(cutoff) {
			delete(m.recs, op)
			n++
		}
	}
	return n, nil
}

// compareCreated orders records oldest first, then by operation name.
func compareCreated(a, b Record) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.Operation, b.Operation)
}

// checkCandidate reports why candidate cannot be claimed, or nil.
func checkCandidate(candidate Record) error {
	switch {
	case candidate.Operation == "":
		return fmt.Errorf("persist: claim: empty operation name")
	case candidate.Key == "":
		return fmt.Errorf("persist: claim %q: empty key", candidate.Operation)
	case candidate.Attempts < 0:
		return fmt.Errorf("persist: claim %q: negative attempts %d", candidate.Operation, candidate.Attempts)
	}
	return nil
}

// checkFinish reports why Finish cannot record state and attempts, or nil.
func checkFinish(state State, attempts int) error {
	if state != Pending && state != Done {
		return fmt.Errorf("persist: finish: invalid state %v", state)
	}
	if attempts < 0 {
		return fmt.Errorf("persist: finish: negative attempts %d", attempts)
	}
	return nil
}
