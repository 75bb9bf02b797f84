package idempotency

import (
	"context"
	"errors"
	"sync"
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
// stop is called; stop returns once a renewal under way has ended, so
// nothing of it outlives stop. failed is called with each renewal's
// error. Renewal stops early if the claim was taken over (ErrClaimEnded).
// A handler that returns within ttl/renewals costs one timer and no
// goroutine.
func keepAlive(c Claim, ttl time.Duration, now func() time.Time, failed func(error)) (stop func()) {
	r := &renewer{c: c, ttl: ttl, every: max(ttl/renewals, time.Millisecond), now: now, failed: failed}
	r.mu.Lock() // fire reads r.t under mu
	r.t = time.AfterFunc(r.every, r.fire)
	r.mu.Unlock()
	return r.stop
}

// renewer is keepAlive's state.
type renewer struct {
	c       Claim
	ttl     time.Duration
	every   time.Duration
	now     func() time.Time
	failed  func(error)
	t       *time.Timer // guarded by mu
	mu      sync.Mutex
	stopped bool           // guarded by mu
	running sync.WaitGroup // a renewal under way
}

// fire renews the claim once, then schedules the next renewal.
func (r *renewer) fire() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.running.Add(1)
	r.mu.Unlock()
	defer r.running.Done()
	ctx, cancel := context.WithTimeout(context.Background(), r.every)
	err := r.c.Renew(ctx, r.now().Add(r.ttl))
	cancel()
	if err != nil {
		r.failed(err)
		if errors.Is(err, ErrClaimEnded) {
			return
		}
	}
	r.mu.Lock()
	if !r.stopped {
		r.t.Reset(r.every)
	}
	r.mu.Unlock()
}

func (r *renewer) stop() {
	r.mu.Lock()
	r.stopped = true
	r.t.Stop()
	r.mu.Unlock()
	r.running.Wait()
}

// settleContext returns the context of the store call that settles a
// claim: ctx's values (the store's transaction), not its end, and a bound
// of its own.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	l := settleDeadline(ctx)
	return l, l.end
}

// settleDeadline is settleContext's context.
func settleDeadline(ctx context.Context) *lazyDeadline {
	return &lazyDeadline{parent: context.WithoutCancel(ctx), deadline: time.Now().Add(settleTimeout)}
}
