package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/postgres"
)

// The count of failed runs is a row of the database: a new Store on the
// same table (another instance, or the process restarted) goes on
// counting, and the message is a dead letter after MaxFailures runs in
// all.
func TestDeadLetterCountIsDurable(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, 4)
	first := newStore(t, pool)
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return nil, errors.New("boom") }
	for range 3 {
		_, _, err := (&idempotency.Inbox{Store: first}).Do(ctx, "evt_durable", nil, fn)
		require.EqualError(t, err, "boom")
	}
	second := postgres.New(newPool(t, 4), postgres.WithTable(unquote(first.Table())))
	in := &idempotency.Inbox{Store: second}
	var last error
	for range 10 {
		_, _, last = in.Do(ctx, "evt_durable", nil, fn)
	}
	assert.Equal(t, idempotency.DefaultMaxFailures, runs, "3 runs on the first store, 2 on the second")
	assert.ErrorIs(t, last, idempotency.ErrDeadLetter)
	dls, err := in.DeadLetters(ctx, 10)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, "evt_durable", dls[0].Key)
	assert.Equal(t, "boom", dls[0].LastError)
}

// unquote returns the name inside a quoted single-part table name.
func unquote(t string) string { return t[1 : len(t)-1] }
