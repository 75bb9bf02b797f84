package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/redis"
)

// TestFrozenRedisBoundedByContext: against a Redis that accepts commands and
// does not answer, every method returns soon after its context's deadline,
// with an error wrapping context.DeadlineExceeded, whether or not the client
// has ContextTimeoutEnabled, and although the client's own read timeout (30 s
// here) is far longer. Once Redis answers again, nothing was lost: the claim
// made while it was frozen, if it was applied, returns the same key.
func TestFrozenRedisBoundedByContext(t *testing.T) {
	const (
		deadline = 300 * time.Millisecond
		bound    = 10 * time.Second // far from the deadline, far from the 30 s read timeout
	)
	for _, ctxTimeouts := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) {
			srv := startServer(t)
			c := goredis.NewClient(&goredis.Options{
				Addr:                  srv.Addr,
				ReadTimeout:           30 * time.Second,
				WriteTimeout:          30 * time.Second,
				ContextTimeoutEnabled: ctxTimeouts,
			})
			t.Cleanup(func() { _ = c.Close() })
			s := redis.New(c, redis.WithPrefix(newPrefix()))
			_, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "op", Key: "k"})
			require.NoError(t, err)
			require.True(t, claimed)

			srv.Freeze(t)
			for _, tt := range storeCalls(s) {
				t.Run(tt.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), deadline)
					defer cancel()
					start := time.Now()
					err := tt.call(ctx)
					elapsed := time.Since(start)
					t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
					require.Error(t, err)
					assert.ErrorIs(t, err, context.DeadlineExceeded)
					assert.True(t, strings.HasPrefix(err.Error(), "persist/redis: "), err.Error())
					assert.Less(t, elapsed, bound, "bounded by the context, not by the client's read timeout")
				})
			}

			// A canceled context ends a call the same way.
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(50*time.Millisecond, cancel)
			_, _, err = s.Claim(ctx, persist.Record{Operation: "op3", Key: "k3"})
			assert.ErrorIs(t, err, context.Canceled)

			srv.Thaw()
			ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			rec, _, err := s.Claim(ctx, persist.Record{Operation: "op2", Key: "k2"})
			require.NoError(t, err, "Redis answers again")
			assert.Equal(t, "k2", rec.Key, "the operation keeps its key whether or not the frozen claim was applied")
		})
	}
}

// TestContextDoneBeforeCall: a call with a context already done sends
// nothing and says why.
func TestContextDoneBeforeCall(t *testing.T) {
	srv := startServer(t)
	s := redis.New(srv.client(t), redis.WithPrefix(newPrefix()))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := s.Claim(ctx, persist.Record{Operation: "op", Key: "k"})
	assert.ErrorIs(t, err, context.Canceled)
	recs, err := s.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, recs, "nothing was claimed")
}
