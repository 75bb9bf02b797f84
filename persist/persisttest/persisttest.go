// Package persisttest is the conformance suite for persist.Store
// implementations. Every backend's tests call Run, so that the memory, bolt and
// redis stores keep one contract:
//
//	func TestConformance(t *testing.T) {
//		persisttest.Run(t, func(t *testing.T) persist.Store { return persist.NewMemory() })
//	}
//
// It also holds the claim benchmarks shared by the backends (Benchmark).
//
// The suite uses Created times in whole seconds, so a backend that keeps
// Created at a coarser precision than nanoseconds (down to a microsecond)
// passes it.
package persisttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist"
)

// Run runs the conformance suite as subtests of t. newStore is called once per
// subtest, sequentially, and must return an empty Store of its own; it should
// register any cleanup (closing files, stopping servers) with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) persist.Store) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s persist.Store)
	}{
		{"ClaimNew", testClaimNew},
		{"ClaimZeroCreated", testClaimZeroCreated},
		{"ClaimInvalid", testClaimInvalid},
		{"ReclaimSameKey", testReclaimSameKey},
		{"ClaimOperationNames", testClaimOperationNames},
		{"Finish", testFinish},
		{"FinishNotFound", testFinishNotFound},
		{"FinishInvalid", testFinishInvalid},
		{"PendingOrder", testPendingOrder},
		{"PendingEmpty", testPendingEmpty},
		{"PendingCopies", testPendingCopies},
		{"Delete", testDelete},
		{"Expire", testExpire},
		{"ConcurrentClaimOneOperation", testConcurrentClaimOne},
		{"ConcurrentClaimManyOperations", testConcurrentClaimMany},
		{"CanceledContext", testCanceledContext},
		{"GaveUp", testGaveUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newStore(t))
		})
	}
}

// base is the Created time of the suite's first record.
var base = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// candidate returns a record to claim for op, created i seconds after base.
func candidate(op string, i int) persist.Record {
	return persist.Record{
		Operation:   op,
		Key:         "key-" + op + "-" + strconv.Itoa(i),
		Fingerprint: "fp-" + op,
		Created:     base.Add(time.Duration(i) * time.Second),
	}
}

// requireRecord fails t unless got equals want, comparing Created as instants.
func requireRecord(t *testing.T, want, got persist.Record) {
	t.Helper()
	require.Truef(t, want.Created.Equal(got.Created), "Created: want %v, got %v", want.Created, got.Created)
	want.Created, got.Created = time.Time{}, time.Time{}
	require.Equal(t, want, got)
}

// operations returns the Operation of each record, in order.
func operations(recs []persist.Record) []string {
	ops := make([]string, 0, len(recs))
	for _, r := range recs {
		ops = append(ops, r.Operation)
	}
	return ops
}

// mustClaim claims c and fails t unless it was a new claim.
func mustClaim(t *testing.T, s persist.Store, c persist.Record) persist.Record {
	t.Helper()
	rec, claimed, err := s.Claim(t.Context(), c)
	require.NoError(t, err)
	require.True(t, claimed, "claim of %q", c.Operation)
	return rec
}

func testClaimNew(t *testing.T, s persist.Store) {
	c := candidate("refund:ch_1", 0)
	c.State = persist.Done // ignored: a new record is Pending
	rec, claimed, err := s.Claim(t.Context(), c)
	require.NoError(t, err)
	assert.True(t, claimed)
	want := c
	want.State = persist.Pending
	requireRecord(t, want, rec)
}

func testClaimZeroCreated(t *testing.T, s persist.Store) {
	c := candidate("op", 0)
	c.Created = time.Time{}
	before := time.Now()
	rec, claimed, err := s.Claim(t.Context(), c)
	after := time.Now()
	require.NoError(t, err)
	require.True(t, claimed)
	assert.False(t, rec.Created.Before(before.Add(-time.Millisecond)), "Created %v before %v", rec.Created, before)
	assert.False(t, rec.Created.After(after.Add(time.Millisecond)), "Created %v after %v", rec.Created, after)

	again, claimed, err := s.Claim(t.Context(), candidate("op", 1))
	require.NoError(t, err)
	require.False(t, claimed)
	requireRecord(t, rec, again)
}

func testClaimInvalid(t *testing.T, s persist.Store) {
	tests := []struct {
		name string
		edit func(*persist.Record)
	}{
		{"empty operation", func(r *persist.Record) { r.Operation = "" }},
		{"empty key", func(r *persist.Record) { r.Key = "" }},
		{"negative attempts", func(r *persist.Record) { r.Attempts = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := candidate("op", 0)
			tt.edit(&c)
			_, claimed, err := s.Claim(t.Context(), c)
			require.Error(t, err)
			assert.False(t, claimed)
		})
	}
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
}

func testReclaimSameKey(t *testing.T, s persist.Store) {
	first := mustClaim(t, s, candidate("op", 0))
	for i := 1; i <= 3; i++ {
		other := candidate("op", i) // another key, another time
		other.Fingerprint = "another request"
		rec, claimed, err := s.Claim(t.Context(), other)
		require.NoError(t, err)
		assert.False(t, claimed, "reclaim %d", i)
		requireRecord(t, first, rec)
	}
}

func testClaimOperationNames(t *testing.T, s persist.Store) {
	names := []string{
		"a",
		"refund:ch_123",
		"with space/and/slashes",
		"{hash}:tag",
		"pending", // a name a backend might use for its own index
		"ünïcødé ✓",
		string(make([]byte, 600)), // 600 NUL bytes
	}
	for i, op := range names {
		c := candidate(op, i)
		rec := mustClaim(t, s, c)
		want := c
		want.State = persist.Pending
		requireRecord(t, want, rec)
	}
	for i, op := range names {
		rec, claimed, err := s.Claim(t.Context(), candidate(op, 100+i))
		require.NoError(t, err)
		require.False(t, claimed, "%q", op)
		assert.Equal(t, candidate(op, i).Key, rec.Key, "%q", op)
	}
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, names, operations(pending))
}

func testFinish(t *testing.T, s persist.Store) {
	tests := []struct {
		name        string
		steps       []persist.State // Finish calls in order, attempts 1, 2, ...
		wantState   persist.State
		wantPending bool
	}{
		{"done", []persist.State{persist.Done}, persist.Done, false},
		{"still pending", []persist.State{persist.Pending}, persist.Pending, true},
		{"pending then done", []persist.State{persist.Pending, persist.Done}, persist.Done, false},
		{"done then pending: Done is final", []persist.State{persist.Done, persist.Pending}, persist.Done, false},
		{"done twice", []persist.State{persist.Done, persist.Done}, persist.Done, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := candidate("finish:"+tt.name, i)
			claimed := mustClaim(t, s, c)
			for n, st := range tt.steps {
				require.NoError(t, s.Finish(t.Context(), c.Operation, st, n+1))
			}
			rec, again, err := s.Claim(t.Context(), candidate(c.Operation, 99))
			require.NoError(t, err)
			require.False(t, again)
			want := claimed
			want.State = tt.wantState
			want.Attempts = len(tt.steps)
			requireRecord(t, want, rec)

			pending, err := s.Pending(t.Context())
			require.NoError(t, err)
			if tt.wantPending {
				assert.Contains(t, operations(pending), c.Operation)
			} else {
				assert.NotContains(t, operations(pending), c.Operation)
			}
		})
	}
}

func testFinishNotFound(t *testing.T, s persist.Store) {
	mustClaim(t, s, candidate("other", 0))
	for _, st := range []persist.State{persist.Pending, persist.Done} {
		err := s.Finish(t.Context(), "missing", st, 1)
		require.ErrorIs(t, err, persist.ErrNotFound, "state %v", st)
	}
	mustClaim(t, s, candidate("gone", 0))
	require.NoError(t, s.Delete(t.Context(), "gone"))
	require.ErrorIs(t, s.Finish(t.Context(), "gone", persist.Done, 1), persist.ErrNotFound)
}

func testFinishInvalid(t *testing.T, s persist.Store) {
	c := candidate("op", 0)
	claimed := mustClaim(t, s, c)
	tests := []struct {
		name     string
		state    persist.State
		attempts int
	}{
		{"zero state", 0, 1},
		{"unknown state", persist.State(9), 1},
		{"negative attempts", persist.Done, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Finish(t.Context(), c.Operation, tt.state, tt.attempts)
			require.Error(t, err)
			assert.NotErrorIs(t, err, persist.ErrNotFound)
		})
	}
	rec, _, err := s.Claim(t.Context(), c)
	require.NoError(t, err)
	requireRecord(t, claimed, rec)
}

func testPendingOrder(t *testing.T, s persist.Store) {
	// Claimed out of order; "c" and "e" finish Done; "b" and "b2" share a time.
	for _, c := range []persist.Record{
		candidate("e", 5), candidate("b2", 2), candidate("a", 1), candidate("d", 4),
		candidate("c", 3), candidate("b", 2), candidate("f", 6),
	} {
		mustClaim(t, s, c)
	}
	require.NoError(t, s.Finish(t.Context(), "c", persist.Done, 1))
	require.NoError(t, s.Finish(t.Context(), "e", persist.Done, 2))
	require.NoError(t, s.Finish(t.Context(), "d", persist.Pending, 3))

	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "b2", "d", "f"}, operations(pending))
	for _, rec := range pending {
		assert.Equal(t, persist.Pending, rec.State, rec.Operation)
		want := candidate(rec.Operation, int(rec.Created.Sub(base)/time.Second))
		assert.Equal(t, want.Key, rec.Key, rec.Operation)
	}
	assert.Equal(t, 3, pending[3].Attempts)
}

func testPendingEmpty(t *testing.T, s persist.Store) {
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)

	mustClaim(t, s, candidate("op", 0))
	require.NoError(t, s.Finish(t.Context(), "op", persist.Done, 1))
	pending, err = s.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
}

func testPendingCopies(t *testing.T, s persist.Store) {
	c := candidate("op", 0)
	want := mustClaim(t, s, c)
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	pending[0].Key = "changed by the caller"
	pending[0].State = persist.Done

	pending, err = s.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	requireRecord(t, want, pending[0])
}

func testDelete(t *testing.T, s persist.Store) {
	mustClaim(t, s, candidate("op", 0))
	mustClaim(t, s, candidate("keep", 1))
	require.NoError(t, s.Delete(t.Context(), "op"))
	require.NoError(t, s.Delete(t.Context(), "op"), "second delete")
	require.NoError(t, s.Delete(t.Context(), "never claimed"))

	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"keep"}, operations(pending))

	// A deleted operation is claimed afresh, with the new candidate's key.
	rec, claimed, err := s.Claim(t.Context(), candidate("op", 7))
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Equal(t, candidate("op", 7).Key, rec.Key)
}

func testExpire(t *testing.T, s persist.Store) {
	for i := range 5 {
		mustClaim(t, s, candidate("op"+strconv.Itoa(i), i))
	}
	require.NoError(t, s.Finish(t.Context(), "op0", persist.Done, 1)) // done records expire too
	require.NoError(t, s.Finish(t.Context(), "op3", persist.Done, 1))

	tests := []struct {
		name        string
		cutoff      time.Time
		wantDeleted int
		wantPending []string
	}{
		{"before all", base, 0, []string{"op1", "op2", "op4"}},
		{"strictly before cutoff", base.Add(2 * time.Second), 2, []string{"op2", "op4"}},
		{"again", base.Add(2 * time.Second), 0, []string{"op2", "op4"}},
		{"between", base.Add(3*time.Second + time.Millisecond), 2, []string{"op4"}},
		{"after all", base.Add(time.Hour), 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := s.Expire(t.Context(), tt.cutoff)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDeleted, n)
			pending, err := s.Pending(t.Context())
			require.NoError(t, err)
			if tt.wantPending == nil {
				assert.Empty(t, pending)
			} else {
				assert.Equal(t, tt.wantPending, operations(pending))
			}
		})
	}
	// Expired operations are gone: Finish cannot find them, Claim starts afresh.
	require.ErrorIs(t, s.Finish(t.Context(), "op3", persist.Done, 2), persist.ErrNotFound)
	_, claimed, err := s.Claim(t.Context(), candidate("op0", 10))
	require.NoError(t, err)
	assert.True(t, claimed)
}

// claimResult is what one concurrent claimer saw.
type claimResult struct {
	rec     persist.Record
	claimed bool
	err     error
}

// claimAll claims candidates concurrently, released together, and returns the
// results in the order of candidates.
func claimAll(ctx context.Context, s persist.Store, candidates []persist.Record) []claimResult {
	results := make([]claimResult, len(candidates))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range candidates {
		wg.Go(func() {
			<-start
			rec, claimed, err := s.Claim(ctx, c)
			results[i] = claimResult{rec, claimed, err}
		})
	}
	close(start)
	wg.Wait()
	return results
}

func testConcurrentClaimOne(t *testing.T, s persist.Store) {
	const n = 50
	candidates := make([]persist.Record, n)
	for i := range candidates {
		candidates[i] = candidate("op", i) // every claimer brings its own key
	}
	results := claimAll(t.Context(), s, candidates)
	winners := 0
	for i, r := range results {
		require.NoError(t, r.err, "claimer %d", i)
		requireRecord(t, results[0].rec, r.rec)
		if r.claimed {
			winners++
			assert.Equal(t, candidates[i].Key, r.rec.Key, "the winner's own key")
		}
	}
	assert.Equal(t, 1, winners, "claimers that saw claimed=true")
}

func testConcurrentClaimMany(t *testing.T, s persist.Store) {
	const ops, perOp = 8, 8
	var candidates []persist.Record
	for j := range perOp {
		for i := range ops {
			candidates = append(candidates, candidate(fmt.Sprintf("op%d", i), j))
		}
	}
	results := claimAll(t.Context(), s, candidates)
	keys := make(map[string]string)
	winners := make(map[string]int)
	for i, r := range results {
		require.NoError(t, r.err, "claimer %d", i)
		op := candidates[i].Operation
		if k, ok := keys[op]; ok {
			assert.Equal(t, k, r.rec.Key, op)
		}
		keys[op] = r.rec.Key
		if r.claimed {
			winners[op]++
		}
	}
	require.Len(t, keys, ops)
	for op := range keys {
		assert.Equal(t, 1, winners[op], op)
	}
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, ops)
}

func testCanceledContext(t *testing.T, s persist.Store) {
	mustClaim(t, s, candidate("existing", 0))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		call func() error
	}{
		{"Claim", func() error {
			_, claimed, err := s.Claim(ctx, candidate("new", 1))
			if claimed {
				return errors.New("claimed with a canceled context")
			}
			return err
		}},
		{"Claim existing", func() error {
			_, _, err := s.Claim(ctx, candidate("existing", 1))
			return err
		}},
		{"Finish", func() error { return s.Finish(ctx, "existing", persist.Done, 1) }},
		{"Pending", func() error { _, err := s.Pending(ctx); return err }},
		{"Delete", func() error { return s.Delete(ctx, "existing") }},
		{"Expire", func() error { _, err := s.Expire(ctx, base.Add(time.Hour)); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.call(), context.Canceled)
		})
	}
	// Nothing changed.
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"existing"}, operations(pending))
}

// testGaveUp: a Claim whose caller gives up while it is in flight (its
// context canceled at a random moment) may still take effect, but only as
// itself: what it leaves is no record or its candidate's, whole, and never
// replaces the record a later Claim saw. A Claim made after the first
// returned, and every Claim after that, get one key, whenever the
// abandoned write lands. In every other run a Claim of another operation
// runs beside the abandoned one: a caller that gives up never fails
// another's Claim (a Store that shares round trips between callers must
// not end them for all).
func testGaveUp(t *testing.T, s persist.Store) {
	const runs = 40
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for i := range runs {
		op := "gaveup:" + strconv.Itoa(i)
		abandoned, later := candidate(op, 0), candidate(op, 1)
		ctx, cancel := context.WithCancel(t.Context())
		delay := time.Duration(rng.IntN(400)) * time.Microsecond
		var (
			wg          sync.WaitGroup
			errLive     error
			liveClaimed bool
		)
		if i%2 == 1 {
			wg.Go(func() { _, liveClaimed, errLive = s.Claim(t.Context(), candidate(op+":live", 0)) })
		}
		stop := time.AfterFunc(delay, cancel)
		_, _, errA := s.Claim(ctx, abandoned)
		stop.Stop()
		cancel()
		wg.Wait()
		if i%2 == 1 {
			require.NoError(t, errLive, "run %d: a caller that gave up failed another's claim", i)
			assert.True(t, liveClaimed, "run %d", i)
		}
		recB, _, err := s.Claim(t.Context(), later)
		require.NoError(t, err, "run %d", i)
		if errA == nil {
			assert.Equal(t, abandoned.Key, recB.Key, "run %d: the first claim succeeded", i)
		} else {
			assert.Contains(t, []string{abandoned.Key, later.Key}, recB.Key, "run %d: a record of neither claim", i)
		}
		want := later
		if recB.Key == abandoned.Key {
			want = abandoned
		}
		want.State = persist.Pending
		requireRecord(t, want, recB) // the candidate's record, whole
		// Whatever the abandoned claim still does lands by now or never
		// changes the record: later claims keep recB's key.
		for j := range 3 {
			time.Sleep(time.Millisecond)
			recC, claimed, err := s.Claim(t.Context(), candidate(op, 2+j))
			require.NoError(t, err, "run %d", i)
			assert.False(t, claimed, "run %d: the record recB saw is gone", i)
			assert.Equal(t, recB.Key, recC.Key, "run %d: an abandoned claim replaced the record a later claim saw", i)
		}
	}
}
