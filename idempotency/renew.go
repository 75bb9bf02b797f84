package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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

// eventLog counts and logs an event of a claim's scope.
type eventLog func(level slog.Level, event string, attrs ...slog.Attr)

// keepAlive renews c every ttl/renewals, to now()+ttl, until the returned
// stop is called; stop returns once a renewal under way has ended, so
// nothing of it outlives stop. Each renewal's error is logged as a
// store_error. Renewal stops early if the claim was taken over (ErrClaimEnded).
// A handler that returns within ttl/renewals costs one timer and no
// goroutine.
func keepAlive(c Renewer, ttl time.Duration, now func() time.Time, log eventLog) (stop func()) {
	r := &renewer{c: c, ttl: ttl, every: max(ttl/renewals, time.Millisecond), now: now, log: log}
	r.mu.Lock() // fire reads r.t under mu
	r.t = time.AfterFunc(r.every, r.fire)
	r.mu.Unlock()
	return r.stop
}

// renewer is keepAlive's state.
type renewer struct {
	c       Renewer
	ttl     time.Duration
	every   time.Duration
	now     func() time.Time
	log     eventLog
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
		r.log(slog.LevelWarn, "store_error", slog.String("error", "renew: "+err.Error()))
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

var _ Renewer = (*memClaim)(nil)

// renewerOf returns c as a Renewer, looking through the middleware's own
// wrapper (ownedClaim).
func renewerOf(c Claim) (Renewer, bool) {
	if oc, ok := c.(ownedClaim); ok {
		c = oc.Claim
	}
	r, ok := c.(Renewer)
	return r, ok
}

// keepClaim renews c every ttl/renewals while its operation runs and
// returns the stop of keepAlive. A claim that is not a Renewer is not
// renewed: the first time, warned is set and log is called with the event
// no_renewal.
func keepClaim(c Claim, store Store, ttl time.Duration, now func() time.Time, warned *atomic.Bool, log eventLog) (stop func()) {
	r, ok := renewerOf(c)
	if !ok {
		warnNoRenewal(store, ttl, warned, log)
		return func() {}
	}
	return keepAlive(r, ttl, now, log)
}

// warnNoRenewal logs, once per warned, that store's claims are not
// Renewers.
func warnNoRenewal(store Store, ttl time.Duration, warned *atomic.Bool, log eventLog) {
	if warned.CompareAndSwap(false, true) {
		log(slog.LevelWarn, "no_renewal", slog.String("store", fmt.Sprintf("%T", store)),
			slog.String("detail", "the store's claims are not Renewers: a claim passes on at its lease (Lease "+
				ttl.String()+") even while its owner runs, so a run slower than that may run twice"))
	}
}
