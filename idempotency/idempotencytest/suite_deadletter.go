package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// runDeadLetters runs the rules of Inbox.Do's dead letters; the store must
// make Failers and be a DeadLetterStore.
func runDeadLetters(t *testing.T, f Factory) {
	rules := []struct {
		name string
		run  func(*testing.T, Env)
	}{
		{"InboxDeadLetter", inboxDeadLetter},
		{"InboxFailuresThenSuccess", inboxFailuresThenSuccess},
		{"InboxDeadLetterTruncatedError", inboxDeadLetterTruncated},
		{"InboxNoDeadLetters", inboxNoDeadLetters},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) { r.run(t, f(t)) })
	}
}

// deliver calls in.Do for key with fn n times and returns the errors.
func deliver(in *idempotency.Inbox, key string, n int, fn func(context.Context) ([]byte, error)) []error {
	errs := make([]error, n)
	for i := range errs {
		_, _, errs[i] = in.Do(context.Background(), key, []byte(`{"id":"`+key+`"}`), fn)
	}
	return errs
}

// inboxDeadLetter: a message whose fn always fails runs MaxFailures (5)
// times over 20 deliveries, then is a dead letter, listed with its count
// and last error; released, it runs again.
func inboxDeadLetter(t *testing.T, env Env) {
	in := &idempotency.Inbox{Store: env.Store, Name: "orders"}
	other := &idempotency.Inbox{Store: env.Store, Name: "refunds"}
	runs := 0
	failing := func(ctx context.Context) ([]byte, error) {
		runs++
		if err := env.Apply(ctx, "evt_poison"); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("boom %d", runs)
	}
	errs := deliver(in, "evt_poison", 20, failing)
	require.Equal(t, idempotency.DefaultMaxFailures, runs, "at most MaxFailures runs over 20 deliveries")
	for i, err := range errs {
		if i < idempotency.DefaultMaxFailures {
			assert.EqualError(t, err, fmt.Sprintf("boom %d", i+1), "delivery %d: fn's error", i+1)
		} else {
			assert.ErrorIs(t, err, idempotency.ErrDeadLetter, "delivery %d", i+1)
		}
	}
	assert.Equal(t, int64(20-idempotency.DefaultMaxFailures), in.Stats().DeadLetter)

	dls, err := in.DeadLetters(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, "evt_poison", dls[0].Key)
	assert.Equal(t, idempotency.DefaultMaxFailures, dls[0].Failures)
	assert.Equal(t, "boom 5", dls[0].LastError)
	assert.False(t, dls[0].Failed.IsZero())
	assert.True(t, dls[0].Expires.After(dls[0].Failed))
	none, err := other.DeadLetters(context.Background(), 10)
	require.NoError(t, err)
	assert.Empty(t, none, "another inbox's dead letters are its own")

	require.NoError(t, in.ReleaseDeadLetter(context.Background(), "evt_poison"))
	dls, err = in.DeadLetters(context.Background(), 10)
	require.NoError(t, err)
	assert.Empty(t, dls, "released")
	res, replayed, err := in.Do(context.Background(), "evt_poison", []byte(`{"id":"evt_poison"}`), func(ctx context.Context) ([]byte, error) {
		runs++
		return []byte("fixed"), env.Apply(ctx, "evt_fixed")
	})
	require.NoError(t, err, "a released dead letter runs again")
	assert.False(t, replayed)
	assert.Equal(t, "fixed", string(res))
	assert.Equal(t, idempotency.DefaultMaxFailures+1, runs)
	assert.Equal(t, 1, env.Count("evt_fixed"))
	_, replayed, err = in.Do(context.Background(), "evt_poison", []byte(`{"id":"evt_poison"}`), failing)
	require.NoError(t, err)
	assert.True(t, replayed, "its result is stored")
	if env.Store.Atomic() {
		assert.Equal(t, 0, env.Count("evt_poison"), "the failed runs rolled back")
	}
}

// inboxFailuresThenSuccess: failures below MaxFailures do not make a dead
// letter; a success after them is stored and replayed.
func inboxFailuresThenSuccess(t *testing.T, env Env) {
	in := &idempotency.Inbox{Store: env.Store, MaxFailures: 3}
	runs := 0
	fn := func(ctx context.Context) ([]byte, error) {
		runs++
		if runs < 3 {
			return nil, errors.New("transient")
		}
		return []byte("ok"), env.Apply(ctx, "evt_flaky")
	}
	errs := deliver(in, "evt_flaky", 5, fn)
	assert.Error(t, errs[0])
	assert.Error(t, errs[1])
	for _, err := range errs[2:] {
		assert.NoError(t, err)
	}
	assert.Equal(t, 3, runs)
	assert.Equal(t, 1, env.Count("evt_flaky"))
	dls, err := in.DeadLetters(context.Background(), 10)
	require.NoError(t, err)
	assert.Empty(t, dls)
}

// inboxDeadLetterTruncated: a dead letter keeps at most MaxErrorLength
// bytes of the error, cut at a character boundary.
func inboxDeadLetterTruncated(t *testing.T, env Env) {
	in := &idempotency.Inbox{Store: env.Store, MaxFailures: 1}
	long := "x" + strings.Repeat("é", idempotency.MaxErrorLength) // 2 bytes each: the limit falls inside one
	errs := deliver(in, "evt_long", 2, func(context.Context) ([]byte, error) { return nil, errors.New(long) })
	assert.EqualError(t, errs[0], long, "Do returns fn's error whole")
	assert.ErrorIs(t, errs[1], idempotency.ErrDeadLetter)
	dls, err := in.DeadLetters(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, long[:idempotency.MaxErrorLength-1], dls[0].LastError)
	assert.Equal(t, 1, dls[0].Failures)
}

// inboxNoDeadLetters: a negative MaxFailures never makes a dead letter.
func inboxNoDeadLetters(t *testing.T, env Env) {
	in := &idempotency.Inbox{Store: env.Store, MaxFailures: -1}
	runs := 0
	errs := deliver(in, "evt_forever", 8, func(context.Context) ([]byte, error) {
		runs++
		return nil, errors.New("boom")
	})
	assert.Equal(t, 8, runs)
	for _, err := range errs {
		assert.NotErrorIs(t, err, idempotency.ErrDeadLetter)
	}
}
