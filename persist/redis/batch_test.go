package redis_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/redis"
)

// TestClaimGaveUpWhileQueuedSendsNothing: while Redis is frozen, MaxSenders
// claims fill every pipeline in flight and a further claim waits in the
// queue; its caller gives up there. Once Redis answers, the sent claims are
// made (they were on the wire) and the queued one is not: a caller that left
// before its claim was sent leaves nothing. No goroutine remains.
func TestClaimGaveUpWhileQueuedSendsNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the server stops
	srv := startServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	s := redis.New(c, redis.WithPrefix(newPrefix()))
	_, _, err := s.Claim(t.Context(), persist.Record{Operation: "warm", Key: "kwarm"}) // a connection and the script
	require.NoError(t, err)

	srv.Freeze(t)
	claim := func(op string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, _, err := s.Claim(ctx, persist.Record{Operation: op, Key: "k" + op})
		return err
	}
	// One at a time: each finds every earlier pipeline stuck, so starts its own.
	for i := range redis.MaxSenders {
		assert.ErrorIs(t, claim("sent"+strconv.Itoa(i)), context.DeadlineExceeded)
	}
	assert.ErrorIs(t, claim("queued"), context.DeadlineExceeded)
	srv.Thaw()

	// The senders end once Redis answers: a later claim is sent and answered.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, claimed, err := s.Claim(ctx, persist.Record{Operation: "after", Key: "kafter"})
	require.NoError(t, err)
	assert.True(t, claimed)
	require.Eventually(t, func() bool {
		n, err := c.Exists(ctx, "test"+"x").Result() // a round trip behind every pipeline sent before
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond)
	for i := range redis.MaxSenders {
		rec, claimed, err := s.Claim(ctx, persist.Record{Operation: "sent" + strconv.Itoa(i), Key: "other"})
		require.NoError(t, err)
		assert.False(t, claimed, "sent%d was on the wire before its caller left: Redis made it", i)
		assert.Equal(t, "ksent"+strconv.Itoa(i), rec.Key)
	}
	rec, claimed, err := s.Claim(ctx, persist.Record{Operation: "queued", Key: "fresh"})
	require.NoError(t, err)
	assert.True(t, claimed, "the queued claim whose caller left was never sent")
	assert.Equal(t, "fresh", rec.Key)
}

// TestClaimBatchesManyCallers: 64 goroutines claim 50 operations each, every
// operation twice under different keys; both claims of an operation get one
// key, and each operation is claimed once.
func TestClaimBatchesManyCallers(t *testing.T) {
	srv := startServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 8})
	defer c.Close()
	s := redis.New(c, redis.WithPrefix(newPrefix()))
	const goroutines, perG = 64, 50
	var mu sync.Mutex
	keys := map[string]string{}
	created := map[string]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				op := "op" + strconv.Itoa((g/2)*perG+i) // goroutines 2n and 2n+1 share operations
				rec, claimed, err := s.Claim(t.Context(), persist.Record{Operation: op, Key: op + "/" + strconv.Itoa(g)})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				if k, ok := keys[op]; ok {
					assert.Equal(t, k, rec.Key, op)
				}
				keys[op] = rec.Key
				if claimed {
					created[op]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, keys, goroutines/2*perG)
	for op, n := range created {
		assert.Equal(t, 1, n, op)
	}
	assert.Len(t, created, goroutines/2*perG)
}
