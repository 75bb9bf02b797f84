package idempotency

import (
	"context"
	"time"
)

// SweepEvery calls store.Sweep every interval until ctx is done, and then
// returns ctx's error. Errors of Sweep are passed to onErr, if not nil,
// and the loop goes on. Run it in a goroutine of its own:
//
//	go idempotency.SweepEvery(ctx, store, time.Hour, nil)
func SweepEvery(ctx context.Context, store Store, interval time.Duration, onErr func(error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			if _, err := store.Sweep(ctx, now); err != nil && onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}
