package resilient

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// HedgingConfig configures hedged requests (WithHedging). The zero value
// hedges once, at the host's recent p95 latency.
type HedgingConfig struct {
	// Delay is how long the Transport waits for an answer before it sends
	// a hedge. With Quantile set, it is the delay used until the host has
	// enough recent latencies for the quantile (0: no hedge until then).
	// Negative means 0.
	Delay time.Duration

	// Quantile, in (0, 1), hedges after that quantile of the host's recent
	// attempt latencies (0.95: after the p95), tracked per host in a small
	// histogram that follows the last thousand or so answers. Default 0.95
	// when Delay is 0 too; 0 with a Delay hedges after the fixed Delay.
	// Outside [0, 1) it is the default. The quantile is used once the host
	// has 5/(1−Quantile) samples (100 for the p95).
	Quantile float64

	// MaxHedges is the number of extra copies a request may send in all,
	// each after another Delay (default 1; below 1 is 1). Hedges count
	// against WithMaxAttempts like retries.
	MaxHedges int
}

// hedging is a resolved HedgingConfig.
type hedging struct {
	delay    time.Duration
	quantile float64 // 0: fixed delay
	max      int
}

func (hc HedgingConfig) resolve() hedging {
	h := hedging{delay: max(hc.Delay, 0), quantile: hc.Quantile, max: max(hc.MaxHedges, 1)}
	if !(h.quantile >= 0 && h.quantile < 1) || (h.quantile == 0 && h.delay == 0) {
		h.quantile = 0.95
	}
	return h
}

// WithHedging makes the Transport hedge requests that are safe to send
// twice at once: when the first answer is slow, it sends another copy of
// the request and returns whichever copy answers first. Hedging is off by
// default.
//
// Only requests with an idempotent method (GET, HEAD, OPTIONS, PUT,
// DELETE), no idempotency key and a body that can be replayed are hedged:
// two copies of a keyed request in flight at once would meet the server's
// "in progress" conflict, and an unsafe request without a key could take
// effect twice.
//
// A hedge is admitted by the host's gate like a retry: it takes a retry
// token and the budget's share, and is not sent while the server pushes
// back or the host is paused by a Retry-After, while its breaker is open, when the rate limiter has
// no token at hand, when attempts (WithMaxAttempts) are used up or when it
// could not finish before the deadline. A refused hedge is simply not sent:
// the copies in flight go on. Each hedge is a new attempt, numbered in the
// attempt header (Retry-Attempt: n) and in the Report.
//
// The first definitive answer (a success or an answer not worth retrying)
// wins: the other copies are cancelled, their bodies closed, and RoundTrip
// returns only once their goroutines have ended. A retryable answer while
// another copy is in flight does not trigger a retry: the Transport waits
// for that copy, which is the retry already under way, and retries (with
// backoff, through the gate) only when every copy has failed. The caller's
// context bounds every copy.
func WithHedging(hc HedgingConfig) Option {
	return func(c *config) {
		h := hc.resolve()
		c.hedge = &h
	}
}

// hedgeMethod reports whether requests with method m may be hedged.
func hedgeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, "":
		return true
	}
	return false
}

// hedgeDelay returns how long to wait before hedging the call's next
// attempt, having sent hedges so far, or 0 if it is not to be hedged.
func (c *call) hedgeDelay(hedges int) time.Duration {
	hg := c.t.cfg.hedge
	if hg == nil || hedges >= hg.max || c.op.key != "" || !c.op.body.replayable() || !hedgeMethod(c.req.Method) {
		return 0
	}
	if hg.quantile > 0 && c.h.latency.hist != nil {
		if d, ok := c.h.latency.hist.quantile(hg.quantile); ok {
			return d
		}
	}
	return hg.delay
}

// reserveHedge admits a hedge to h at now, as reserve and wait admit a retry
// sent at once, except that it never waits: the server's pushback, a host
// paused by a Retry-After, an open breaker, an empty token bucket or budget,
// a rate limiter without a token at hand or a deadline too close refuse it
// (the error says why; nothing is held). The reservation is released like a
// retry's.
func (h *hostState) reserveHedge(c *call, now time.Time) (reservation, error) {
	r := reservation{h: h, retry: true, at: now}
	switch {
	case h.pauses.pushedBack(now):
		return r, ErrPushback
	case h.pauses.pausedFor(now, true) > 0, !c.fits(now, c.expectedLatency(h)):
		return r, ErrDelayTooLong
	case h.breaker != nil && h.breaker.State() == gobreaker.StateOpen:
		return r, ErrCircuitOpen
	}
	if err := r.spend(c, now); err != nil {
		return r, err
	}
	if h.limiter != nil && !h.limiter.AllowN(now, 1) {
		r.cancel()
		return r, ErrDelayTooLong
	}
	if err := r.allow(c, false); err != nil {
		r.cancel()
		return r, err
	}
	return r, nil
}

// hedgeCopy is one copy of a hedged round, owned by the round: its
// admission, its context's cancel, its number.
type hedgeCopy struct {
	res    reservation
	cancel context.CancelFunc
	n      int
	hedge  bool
	wait   time.Duration // before it was sent: the gate's delay, or the hedge delay
	done   bool
}

// hedgeResult is what a copy's goroutine hands back.
type hedgeResult struct {
	k int // index in the round's copies
	a attempt
}

// hedgeRound is a hedged round's copies and their goroutines.
type hedgeRound struct {
	results  chan hedgeResult
	copies   []hedgeCopy
	wg       sync.WaitGroup
	inflight int
}

// arrived counts out a copy whose result has come.
func (r *hedgeRound) arrived() { r.inflight-- }

// hedged sends attempt n (the i-th of the call, admitted by res) and, while
// no definitive answer has come, up to budget hedges, each delay after the
// previous copy, numbered n+1, n+2…; each copy runs in its own goroutine
// with its own context, a child of the caller's. Every copy is settled
// here. It returns the answer that ends the round and its verdict, and the
// number of hedges sent.
//
// The first definitive answer wins: the other copies are cancelled and
// waited for, their answers noted and discarded. A retryable answer, or a
// server's refusal (a 5xx or 429 it says not to retry, such as pushback),
// while another copy is in flight is discarded and the round waits for
// that copy; the round ends with the last answer when every copy failed and the
// timer has not sent another. Every goroutine of the round has ended when
// it returns; the winner's context is cancelled when its body is closed.
func (c *call) hedged(res *reservation, i, n, budget int, delay time.Duration) (attempt, verdict, int) {
	r := &hedgeRound{results: make(chan hedgeResult, 1+budget), copies: make([]hedgeCopy, 0, 1+budget)}
	c.launch(r, *res, i, n, false, res.delay)
	defer r.wg.Wait()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	tick := timer.C
	sent := 0
	var (
		last  attempt
		lastV verdict
	)
	for r.inflight > 0 {
		select {
		case <-tick:
			tick = nil
			if !c.hedge(r, i+sent+1, n+sent+1, delay) {
				continue // not sent; the copies in flight go on
			}
			sent++
			if sent < budget {
				timer.Reset(delay)
				tick = timer.C
			}
		case res := <-r.results:
			r.arrived()
			a, v, won := c.settleCopy(r, res)
			if won {
				return a, v, sent
			}
			last, lastV = a, v
		}
	}
	return last, lastV, sent
}

// launch sends copy n (the i-th of the call, admitted by res) of a hedged
// round in a goroutine of its own, with a context of its own.
func (c *call) launch(r *hedgeRound, res reservation, i, n int, hedge bool, wait time.Duration) {
	ctx, cancel := context.WithCancel(c.ctx)
	k := len(r.copies)
	r.copies = append(r.copies, hedgeCopy{res: res, cancel: cancel, n: n, hedge: hedge, wait: wait})
	job := struct {
		snd sender
		t   try
	}{c.sender(), c.try(ctx, i, n, res.at, nil)} // the goroutine's one allocation
	r.inflight++
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		var a attempt
		job.snd.send(&a, &job.t)
		r.results <- hedgeResult{k, a}
	}()
}

// hedge sends hedge n (the i-th attempt of the call) of round r, delay
// after the copy before it, if attempts are left and the gate admits it.
func (c *call) hedge(r *hedgeRound, i, n int, delay time.Duration) bool {
	if c.led.attempts+r.inflight >= c.t.cfg.maxAttempts {
		return false
	}
	res, err := c.h.reserveHedge(c, c.t.cfg.now())
	if err != nil {
		return false
	}
	c.led.hedgeNums = append(c.led.hedgeNums, n)
	c.launch(r, res, i, n, true, delay)
	c.hedgeSent(n, delay)
	return true
}

// settleCopy settles the copy of round r that answered. It reports whether
// the copy won: the round ends with it, the other copies settled.
func (c *call) settleCopy(r *hedgeRound, res hedgeResult) (attempt, verdict, bool) {
	cp := &r.copies[res.k]
	cp.done = true
	a := res.a
	if !a.sent && r.inflight > 0 {
		// A hedge whose body could not be rewound (GetBody failed)
		// never left: it gives back what it took, and the copy in
		// flight goes on.
		c.withdraw(cp)
		return a, verdict{}, false
	}
	ro := alone
	if r.inflight > 0 {
		ro = racing
	}
	v := c.judge(&a, &cp.res, ro)
	// A server's refusal (a 5xx or 429 it will not have us retry,
	// pushback above all) to one copy says nothing of the copy it
	// is still serving: it does not win, and it ends only this
	// copy. A hedge is a retry to the server, the first to be shed.
	if v.d.Action != Retry && !(ro == racing && shed(&a, v.d)) {
		c.settleLosers(r)
		c.note(&a, v.d, cp.wait, cp.hedge)
		c.keepCopy(&a, cp.cancel)
		return a, v, true
	}
	c.note(&a, v.d, cp.wait, cp.hedge)
	if r.inflight > 0 {
		if a.resp != nil {
			discard(a.resp)
		}
		cp.cancel()
	} else {
		c.keepCopy(&a, cp.cancel)
	}
	return a, v, false
}

// shed reports whether attempt a, decided d, is a server's refusal: a 5xx
// or 429 it says not to retry.
func shed(a *attempt, d Decision) bool {
	return a.resp != nil && d.Action == Terminal && (a.resp.StatusCode >= 500 || a.resp.StatusCode == http.StatusTooManyRequests)
}

// withdraw gives back what copy cp took: it never left (its body could
// not be rewound), and is not counted.
func (c *call) withdraw(cp *hedgeCopy) {
	cp.res.cancel()
	cp.cancel()
	c.led.hedgeNums = slices.DeleteFunc(c.led.hedgeNums, func(n int) bool { return n == cp.n })
}

// keepCopy ties the copy's context to what the caller gets: cancelled when
// the response body is closed, at once when there is no response.
func (c *call) keepCopy(a *attempt, cancel context.CancelFunc) {
	if a.resp == nil {
		cancel()
		return
	}
	a.resp.Body = cancelOnClose(a.resp.Body, cancel)
}

// settleLosers cancels the copies of r still in flight once another has
// won, waits for each, and settles it as a loser (judge): an attempt
// cancelled because another copy answered (Category CategoryCanceled,
// neutral for the host), or an answer that came anyway, discarded (a
// failure counts against the host; a healthy answer earns no token).
func (c *call) settleLosers(r *hedgeRound) {
	for k := range r.copies {
		if !r.copies[k].done {
			r.copies[k].cancel()
		}
	}
	for r.inflight > 0 {
		res := <-r.results
		r.arrived()
		cp := &r.copies[res.k]
		cp.done = true
		a := res.a
		if !a.sent {
			c.withdraw(cp)
			continue
		}
		v := c.judge(&a, &cp.res, loser)
		if a.resp != nil {
			discard(a.resp)
		}
		cp.cancel()
		c.note(&a, v.d, cp.wait, cp.hedge)
	}
}

// hedgeSent emits the decision to send hedge n after delay.
func (c *call) hedgeSent(n int, delay time.Duration) {
	if len(c.t.cfg.observers) == 0 {
		return
	}
	c.emit(Event{Kind: EventHedge, Attempt: n, Delay: delay, Hedge: true})
}

// isHedge reports whether attempt n of the call was a hedge.
func (l *ledger) isHedge(n int) bool {
	for _, h := range l.hedgeNums {
		if h == n {
			return true
		}
	}
	return false
}
