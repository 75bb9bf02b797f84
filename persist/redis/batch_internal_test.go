package redis

import (
	"context"
	"strconv"
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

// TestClaimGaveUpWhileQueuedSendsNothing: while Redis is frozen, maxSenders
// claims fill every script in flight and a further claim waits in the
// queue; its caller gives up there. Once Redis answers, the claims in flight
// are made and answered, and the queued one is not made: a caller that left
// before its claim was sent leaves nothing. No goroutine remains.
func TestClaimGaveUpWhileQueuedSendsNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the server stops
	srv := redistest.Start(t, redistest.Config{})
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, WithPrefix("queuedtest:"))
	_, _, err := s.Claim(t.Context(), persist.Record{Operation: "warm", Key: "kwarm"}) // a connection and the script
	require.NoError(t, err)

	srv.Freeze(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw()
		}
	}()
	type result struct {
		claimed bool
		err     error
	}
	start := func(ctx context.Context, op string) <-chan result {
		out := make(chan result, 1)
		go func() {
			_, claimed, err := s.Claim(ctx, persist.Record{Operation: op, Key: "k" + op})
			out <- result{claimed, err}
		}()
		return out
	}
	// One at a time: each finds every earlier script stuck, so starts its own.
	var inFlight []<-chan result
	for i := range maxSenders {
		inFlight = append(inFlight, start(t.Context(), "sent"+strconv.Itoa(i)))
		waitFor(t, "sent"+strconv.Itoa(i)+" taken", func() bool { n, q := batchState(s); return n == i+1 && q == 0 })
	}
	ctx, cancel := context.WithCancel(t.Context())
	queued := start(ctx, "queued")
	waitFor(t, "queued", func() bool { n, q := batchState(s); return n == maxSenders && q == 1 })
	cancel()
	assert.ErrorIs(t, (<-queued).err, context.Canceled)
	srv.Thaw()
	thawed = true

	for i, ch := range inFlight {
		r := <-ch
		require.NoError(t, r.err, "sent%d", i)
		assert.True(t, r.claimed, "sent%d", i)
	}
	waitFor(t, "senders ended", func() bool { n, _ := batchState(s); return n == 0 })
	rec, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "queued", Key: "fresh"})
	require.NoError(t, err)
	assert.True(t, claimed, "the queued claim whose caller left was never sent")
	assert.Equal(t, "fresh", rec.Key)
}
