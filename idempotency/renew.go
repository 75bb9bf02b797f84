package idempotency

import (
	"context"
	"errors"
	"time"
)

// renewals is how many renewals a lease lasts: a claim is renewed every
// lease/renewals, and passes on only when its owner missed this many in a
// row (the process died, or was paused that long).
const renewals = 3

// settleTimeout bounds the store call that completes or releases a
// claim. It has a context of its own: the handler's may have ended at
// its deadline, and the answer must still be stored.
const settleTimeout = 10 * time.Second

// keepAlive renews c every ttl/renewals, to now()+ttl, until the returned
// stop is called; stop returns once the last renewal has ended, so no
// goroutine outlives it. failed is called with each renewal's error.
// Renewal stops early if the claim was taken over (ErrClaimEnded).
func keepAlive(c Claim, ttl time.Duration, now func() time.Time, failed func(error)) (stop func()) {
	every := max(ttl/renewals, time.Millisecond)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), every)
			err := c.Renew(ctx, now().Add(ttl))
			cancel()
			if err != nil {
				failed(err)
				if errors.Is(err, ErrClaimEnded) {
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// settleContext returns the context of the store call that settles a
// claim: ctx's values (the store's transaction), not its end, and a bound
// of its own.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}
