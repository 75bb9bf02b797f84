package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/internal/redistest"
	"github.com/resilienthttp/resilient/persist"
)

// waitFor polls ok every 5 ms, up to 2000 times, and fails t if it never holds.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for range 2000 {
		if ok() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("after 10 s: not %s", what)
}

// batchState returns how many senders s runs and how many claims are queued.
func batchState(s *Store) (senders, queued int) {
	s.claims.mu.Lock()
	defer s.claims.mu.Unlock()
	return s.claims.senders, len(s.claims.queue)
}

// TestClaimGaveUpWhileQueuedSendsNothing: while every sender is busy, a
// claim waits in the queue, and its caller gives up there. The next sender
// skips it: the claim is never made in Redis, so a caller that left before
// its claim was sent leaves nothing. No goroutine remains. The senders are
// marked busy directly rather than stuck on a frozen Redis: a frozen
// server's connections time out on a loaded machine (go-redis's dial and
// handshake), which ended a sender early and made the test flaky.
func TestClaimGaveUpWhileQueuedSendsNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the server stops
	srv := redistest.Start(t, redistest.Config{})
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, WithPrefix("queuedtest:"))
	setSenders := func(n int) {
		s.claims.mu.Lock()
		s.claims.senders = n
		s.claims.mu.Unlock()
	}

	setSenders(maxSenders) // every sender busy: a claim waits in the queue
	ctx, cancel := context.WithCancel(t.Context())
	queued := make(chan error, 1)
	go func() {
		_, _, err := s.Claim(ctx, persist.Record{Operation: "queued", Key: "kqueued"})
		queued <- err
	}()
	waitFor(t, "queued", func() bool { _, q := batchState(s); return q == 1 })
	cancel()
	require.ErrorIs(t, <-queued, context.Canceled)

	// A sender free again: the next claim starts one, which takes the queue.
	setSenders(0)
	_, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "next", Key: "knext"})
	require.NoError(t, err)
	assert.True(t, claimed)
	waitFor(t, "senders ended", func() bool { n, q := batchState(s); return n == 0 && q == 0 })
	rec, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "queued", Key: "fresh"})
	require.NoError(t, err)
	assert.True(t, claimed, "the queued claim whose caller left was never sent")
	assert.Equal(t, "fresh", rec.Key)
}

// TestBatchContextOutlivesACallerThatGaveUp: a batch's pipeline runs in a
// context of its own. It carries the first call's values but not its
// cancellation; it ends at the latest deadline of its calls (none if one
// has none); and it is cancelled only once every caller of the batch has
// given up. So one caller giving up never fails another whose claim shares
// its script. (The batcher is driven directly: no Redis, no timing.)
func TestBatchContextOutlivesACallerThatGaveUp(t *testing.T) {
	type ctxKey struct{}
	base := time.Now()
	soon, later := base.Add(time.Hour), base.Add(2*time.Hour)
	tests := []struct {
		name      string
		deadlines []time.Time // zero: no deadline
		gaveUp    []int       // calls whose callers left while queued
		want      time.Time   // the pipeline's deadline; zero: none
		wantCalls int
	}{
		{name: "latest of two", deadlines: []time.Time{soon, later}, want: later, wantCalls: 2},
		{name: "latest first", deadlines: []time.Time{later, soon}, want: later, wantCalls: 2},
		{name: "one without a deadline", deadlines: []time.Time{soon, {}}, wantCalls: 2},
		{name: "a call that left while queued is skipped", deadlines: []time.Time{later, soon}, gaveUp: []int{0}, want: soon, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &batcher{}
			var calls []*claimCall
			var cancels []context.CancelFunc
			for i, d := range tt.deadlines {
				ctx := context.WithValue(t.Context(), ctxKey{}, i)
				var cancel context.CancelFunc
				if d.IsZero() {
					ctx, cancel = context.WithCancel(ctx)
				} else {
					ctx, cancel = context.WithDeadline(ctx, d)
				}
				t.Cleanup(cancel)
				c := &claimCall{ctx: ctx, done: make(chan struct{})}
				calls, cancels = append(calls, c), append(cancels, cancel)
				b.queue = append(b.queue, c)
			}
			b.senders = 1
			for _, i := range tt.gaveUp {
				b.giveUp(calls[i])
			}
			taken, ctx, cancel := b.take()
			require.NotNil(t, taken)
			t.Cleanup(cancel)
			require.Len(t, taken, tt.wantCalls)
			assert.Empty(t, b.queue, "every call is taken or skipped")
			d, ok := ctx.Deadline()
			if tt.want.IsZero() {
				assert.False(t, ok, "no deadline when a call has none")
			} else {
				require.True(t, ok)
				assert.True(t, d.Equal(tt.want), "deadline %v, want %v", d, tt.want)
			}
			assert.Equal(t, taken[0].ctx.Value(ctxKey{}), ctx.Value(ctxKey{}), "the first call's values")

			// Every caller but the last gives up in flight: the pipeline goes on.
			for _, c := range taken[:len(taken)-1] {
				cancels[indexOf(calls, c)]()
				b.giveUp(c)
				require.NoError(t, ctx.Err(), "one caller giving up ends no other's claim")
			}
			// The last one too: now nobody waits, and the pipeline ends.
			last := taken[len(taken)-1]
			cancels[indexOf(calls, last)]()
			b.giveUp(last)
			assert.ErrorIs(t, ctx.Err(), context.Canceled, "no caller waits: the pipeline ends")

			none, _, _ := b.take()
			assert.Nil(t, none, "an empty queue retires the sender")
			assert.Zero(t, b.senders)
		})
	}
}

func indexOf(calls []*claimCall, c *claimCall) int {
	for i, x := range calls {
		if x == c {
			return i
		}
	}
	return -1
}
