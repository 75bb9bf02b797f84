package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/resilienthttp/resilient/idempotency"
)

// sweepCounter is a Store whose Sweep counts its calls and fails every
// other one.
type sweepCounter struct {
	idempotency.Store
	calls atomic.Int64
}

func (s *sweepCounter) Sweep(context.Context, time.Time) (int, error) {
	if s.calls.Add(1)%2 == 0 {
		return 0, errors.New("sweep failed")
	}
	return 1, nil
}

func TestSweepEvery(t *testing.T) {
	store := &sweepCounter{Store: idempotency.NewMemoryStore()}
	ctx, cancel := context.WithCancel(context.Background())
	var errs atomic.Int64
	done := make(chan error, 1)
	go func() { done <- idempotency.SweepEvery(ctx, store, time.Millisecond, func(error) { errs.Add(1) }) }()
	for i := 0; i < 10000 && store.calls.Load() < 4; i++ { // bounded
		time.Sleep(time.Millisecond)
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled, "the loop ends with its context")
	assert.GreaterOrEqual(t, store.calls.Load(), int64(4), "it sweeps on every tick")
	assert.GreaterOrEqual(t, errs.Load(), int64(1), "errors are reported and the loop goes on")
}
