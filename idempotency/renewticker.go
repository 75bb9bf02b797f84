package idempotency

import (
	"context"
	"errors"
	"sync"
	"time"
)

// renewTicker renews the claims of a Middleware's running handlers with one
// timer for them all, armed while a handler runs: every ttl/renewals it
// renews each running claim, so a claim is renewed at most ttl/renewals
// after it was made and after each renewal. A handler costs no timer of
// its own, and no goroutine unless it runs at a tick. The timer is a
// time.AfterFunc, not a goroutine: once no handler runs, it fires once
// more and is not armed again.
type renewTicker struct {
	mu    sync.Mutex
	head  *claimRenewer // guarded by mu; the running claims
	t     *time.Timer   // guarded by mu; nil until the first claim
	armed bool          // guarded by mu; t will fire
	every time.Duration // guarded by mu; set at the first claim
}

// claimRenewer is one running claim in renewTicker's list.
type claimRenewer struct {
	c          Renewer
	ttl        time.Duration
	now        func() time.Time
	failed     func(error)
	prev, next *claimRenewer  // guarded by renewTicker.mu
	listed     bool           // guarded by renewTicker.mu
	renewing   bool           // guarded by renewTicker.mu; a renewal is under way
	running    sync.WaitGroup // the renewal under way
}

// keep renews c every ttl/renewals, to now()+ttl, until drop is called
// with what it returns (as keepAlive). ttl is the same for every call on
// w.
func (w *renewTicker) keep(c Renewer, ttl time.Duration, now func() time.Time, failed func(error)) *claimRenewer {
	r := &claimRenewer{c: c, ttl: ttl, now: now, failed: failed}
	w.mu.Lock()
	r.next, r.listed = w.head, true
	if w.head != nil {
		w.head.prev = r
	}
	w.head = r
	if !w.armed {
		w.arm(ttl)
	}
	w.mu.Unlock()
	return r
}

// arm starts the timer. It requires w.mu held.
func (w *renewTicker) arm(ttl time.Duration) {
	w.armed = true
	if w.t == nil {
		w.every = max(ttl/renewals, time.Millisecond)
		w.t = time.AfterFunc(w.every, w.tick)
		return
	}
	w.t.Reset(w.every)
}

// drop ends r's renewals (r may be nil); it returns once a renewal under way has ended,
// so nothing of it outlives the handler.
func (w *renewTicker) drop(r *claimRenewer) {
	if r == nil {
		return // the claim was not renewed (keep)
	}
	w.mu.Lock()
	w.unlink(r)
	w.mu.Unlock()
	r.running.Wait()
}

// unlink takes r out of the list. It requires w.mu held.
func (w *renewTicker) unlink(r *claimRenewer) {
	if !r.listed {
		return
	}
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		w.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next, r.listed = nil, nil, false
}

// tick renews every running claim, each in a goroutine of its own (a
// store's renewal is a round trip), and arms the timer again while any
// runs.
func (w *renewTicker) tick() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := w.head; r != nil; r = r.next {
		if r.renewing {
			continue // the last renewal has not returned: not two at once
		}
		r.renewing = true
		r.running.Add(1)
		go w.renew(r)
	}
	w.armed = false
	if w.head != nil {
		w.arm(0)
	}
}

// renew renews r's claim once; a claim taken over is not renewed again.
func (w *renewTicker) renew(r *claimRenewer) {
	defer r.running.Done()
	ctx, cancel := context.WithTimeout(context.Background(), w.period())
	err := r.c.Renew(ctx, r.now().Add(r.ttl))
	cancel()
	if err != nil {
		r.failed(err)
	}
	w.mu.Lock()
	r.renewing = false
	if errors.Is(err, ErrClaimEnded) {
		w.unlink(r)
	}
	w.mu.Unlock()
}

func (w *renewTicker) period() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.every
}
