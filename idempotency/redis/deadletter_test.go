package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/internal/redistest"
)

// The count of failed runs is kept in Redis as durably as the records: it
// survives a SIGKILL of Redis (appendfsync always), and the message becomes
// a dead letter after MaxFailures runs in all, before and after.
func TestDeadLetterSurvivesRedisCrash(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Dir: t.TempDir(), Args: durable})
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	in := &idempotency.Inbox{Store: newStore(t, c), MaxFailures: 5}
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return nil, errors.New("boom") }
	for range 3 {
		_, _, err := in.Do(ctx, "evt_crash", nil, fn)
		require.EqualError(t, err, "boom")
	}
	srv.Stop() // SIGKILL
	srv.Restart(t)
	require.Eventually(t, func() bool { // the client redials
		return c.Ping(ctx).Err() == nil
	}, 10*time.Second, 20*time.Millisecond)
	var errs []error
	for range 10 {
		_, _, err := in.Do(ctx, "evt_crash", nil, fn)
		errs = append(errs, err)
	}
	assert.Equal(t, 5, runs, "3 runs before the crash, 2 after: the count survived")
	assert.ErrorIs(t, errs[len(errs)-1], idempotency.ErrDeadLetter)
	dls, err := in.DeadLetters(ctx, 10)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, 5, dls[0].Failures)
}
