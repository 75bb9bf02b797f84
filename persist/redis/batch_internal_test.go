package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/internal/redistest"
	"github.com/resilienthttp/resilient/persist"
)

// TestBatchOutlivesACallerThatGaveUp: claims A and B share one script; A's
// caller gives up while it is in flight (Redis frozen). B, whose deadline
// is later, still gets its answer once Redis answers: the batch's context
// ends at the latest deadline of its calls, never at the first caller's,
// so one caller giving up never fails another. The client honours context
// deadlines on the socket (ContextTimeoutEnabled), where that matters.
func TestBatchOutlivesACallerThatGaveUp(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, WithPrefix("batchtest:"))
	_, _, err := s.Claim(t.Context(), persist.Record{Operation: "warm", Key: "kwarm"})
	require.NoError(t, err)
	claim := func(op string, d time.Duration, errs chan<- error) {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		_, _, err := s.Claim(ctx, persist.Record{Operation: op, Key: "k" + op})
		errs <- err
	}
	state := func() (senders, queued int) {
		s.claims.mu.Lock()
		defer s.claims.mu.Unlock()
		return s.claims.senders, len(s.claims.queue)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for range 2000 {
			if ok() {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("after 10 s: not %s", what)
	}

	srv.Freeze(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw()
		}
	}()
	// Every sender stuck on a frozen Redis until its call's deadline.
	const stuck = 3 * time.Second
	stuckErrs := make(chan error, maxSenders)
	for i := range maxSenders {
		go claim("stuck"+string(rune('a'+i)), stuck, stuckErrs)
		waitFor("one more sender", func() bool { n, q := state(); return n == i+1 && q == 0 })
	}
	// A, then B, queued behind them.
	errA, errB := make(chan error, 1), make(chan error, 1)
	go claim("A", stuck+time.Second, errA)
	waitFor("A queued", func() bool { _, q := state(); return q == 1 })
	go claim("B", 30*time.Second, errB)
	waitFor("B queued", func() bool { _, q := state(); return q == 2 })
	for range maxSenders {
		assert.ErrorIs(t, <-stuckErrs, context.DeadlineExceeded)
	}
	// A sender took A and B in one batch (the queue held both) and sent it.
	waitFor("A and B taken", func() bool { _, q := state(); return q == 0 })
	require.ErrorIs(t, <-errA, context.DeadlineExceeded, "A gave up in flight")
	srv.Thaw()
	thawed = true
	require.NoError(t, <-errB, "B is answered although A, first in its batch, gave up")
	rec, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "B", Key: "other"})
	require.NoError(t, err)
	assert.False(t, claimed)
	assert.Equal(t, "kB", rec.Key)
}
