package resilient

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Transport is an http.RoundTripper that makes requests safe to retry.
//
// It treats each request as one operation with one idempotency key, chosen
// before the first attempt and sent on every attempt. It classifies each
// attempt's outcome and waits with jittered backoff between attempts. It
// stops when attempts run out, the deadline nears or the host's gate refuses
// a retry. A request from a loop that retries on its own gets one attempt
// per RoundTrip: the loop drives, and the gate may refuse its retries. The
// package documentation says what each step does. See its sections on
// unsafe requests, retry control, calls of one key, outer retry loops, keys
// on the wire and the RoundTripper contract.
//
// The zero Transport is not usable. A Transport is safe for concurrent use
// by multiple goroutines. It should be reused: its per-host state only works
// if the requests to a host share it.
//
// Most callers should use NewClient or Wrap, which build an *http.Client
// around a Transport; NewTransport builds one alone.
type Transport struct {
	base   http.RoundTripper
	cfg    config
	hosts  hosts
	recent recentKeys
	// flights: the calls of the application's keys in flight, so that
	// callers of one operation take turns (flight.go).
	flights flights
	keys    keySource
	// pending: the recent calls of outer retry loops that send no call id
	// (outerloop.go); touched by marked requests only.
	pending pendingCalls
	// loops: the recent retryable failures of calls without marks and
	// the call sites that loop (loopsite.go); written on failure only.
	loops loops
}

// NewTransport returns a Transport that sends attempts through base
// (http.DefaultTransport if nil), configured by opts.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, cfg: defaultConfig()}
	for _, o := range opts {
		o(&t.cfg)
	}
	t.cfg.keyWire = wireKey(t.cfg.keyHeader)
	if t.cfg.now == nil {
		t.cfg.now = newClock().now
	}
	if t.cfg.logger != nil {
		t.cfg.observers = append(t.cfg.observers, logObserver(t.cfg.logger))
	}
	t.cfg.observed = len(t.cfg.observers) > 0 || t.cfg.hedge != nil || t.cfg.customClassifier
	t.hosts.idleAfter = int64(t.cfg.idleAfter())
	t.hosts.nextSweep.Store(t.cfg.now().UnixNano() + t.hosts.idleAfter)
	return t
}

// CloseIdleConnections closes idle connections of the base transport, if it
// supports it (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// call is the state of one RoundTrip, one part per step of the loop. It
// holds the operation (resolved once), the host whose gate admits each
// attempt, and the ledger. It holds the values the loop builds once for the
// gate (applicant) and for classify (subject). Each attempt's result lives
// in the loop's iteration.
type call struct {
	t   *Transport
	req *http.Request
	ctx context.Context
	op  operation
	h   *hostState
	led ledger
	// outer: what an outer retry loop's call needs (outerloop.go); nil
	// for a request without marks.
	outer *outerCall
	// loop: what a call without marks holds of a loop (loopsite.go),
	// nil until it fails or is recognised as a loop's re-send.
	loop *loopCall
	// applicant: what the gate knows of c; subject: what classify judges
	// c's attempts against. Built once c's first attempt is numbered.
	applicant applicant
	subject   subject
}

// RoundTrip sends req, retrying as configured. See Transport for the
// guarantees. Errors are *Error values. errors.Is matches them against these
// sentinels and the context's errors:
//
//	ErrInvalidKey, ErrInvalidRequest, ErrBodyNotReplayable, ErrStore,
//	ErrOperationMismatch, ErrKeyExpired, ErrCircuitOpen, ErrTokensExhausted,
//	ErrBudgetExhausted, ErrRetriesExhausted, ErrDelayTooLong, ErrRateLimited
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(req)
	if err != nil && t.cfg.refusalResponses {
		if r := refusalResponse(req, err, t.cfg.now()); r != nil {
			return r, nil
		}
	}
	return resp, err
}

func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	c := &call{t: t, req: req, ctx: req.Context()}
	if err := c.resolve(); err != nil {
		return nil, err
	}
	own := c.op.own && !c.op.hop
	joined := false
	if own {
		// c holds the turn of its key (flight.go) until it ends (call.ended).
		var err error
		if joined, err = c.takeTurn(); err != nil {
			return nil, err
		}
	}
	now := t.cfg.now() // the first attempt's admission
	c.h = t.host(req.URL.Host, now)
	var l loop
	l.base = c.firstNumber(own, now)
	c.applicant = applicant{cfg: &t.cfg, ctx: c.ctx, req: req, joined: joined, hop: c.op.hop, single: c.outer.sendsOne()}
	c.subject = c.subjectOf()
	if own || c.outer != nil {
		c.applicant.lax = c.outer != nil && c.outer.lax
		// One defer only (bench/README.md, "Why the hot path is written
		// this way").
		defer c.ended(&l.a, l.base, own)
	}
	return c.run(&l, now)
}

// resolve resolves c's operation before anything is sent: its name, its
// key, its body (operation.prepare), and its claim in the Store. On error
// nothing was sent and the caller's body is closed; the error is the
// ledger's.
func (c *call) resolve() error {
	cfg := &c.t.cfg
	op := &c.op
	op.name, _ = operationFromContext(c.ctx)
	op.hop = c.req.Response != nil
	c.led.start(cfg, c.ctx, c.req, op.name, reportFromContext(c.ctx))
	// A redirect hop continues the operation with the key identity found;
	// it is not claimed again.
	claims := op.name != "" && cfg.store != nil && !op.hop
	var scan *call // the call to scan for a loop's re-send without marks (loopsite.go)
	if c.t.loops.n.Load() != 0 && !op.hop && c.outerMode() == outerAuto {
		scan = c
	}
	o, f := op.prepare(cfg, c.ctx, c.req, &c.t.keys, &c.t.pending, claims, scan)
	if f != nil {
		return c.fail(f.reason, f.cat, f.err)
	}
	c.outer = o
	if claims {
		if f := op.claim(cfg, c.ctx, c.req); f != nil {
			op.body.close()
			return c.fail(f.reason, f.cat, f.err)
		}
	}
	c.led.resolved(op.key, !op.body.replayable())
	return nil
}

// takeTurn waits until c is the only call of its key in flight on the
// Transport. c's key is the application's. flights.acquire gives the turn;
// call.ended ends it. takeTurn reports whether c joined another call of its
// key and waited for it to end. c's first attempt is then a first attempt of
// its own, not a retry of that call's. If c's context ends first, c ends
// with an *Error. Nothing was sent by c. The outcome is unknown, since the
// operation is in flight in this process.
func (c *call) takeTurn() (joined bool, err error) {
	waited, err := c.t.flights.acquire(c.ctx, c.op.key)
	if err != nil {
		c.led.ambiguous = true
		c.op.body.close()
		return false, c.fail(err, CategoryCanceled, errInFlight)
	}
	// A call that waited follows one of its operation whose answer it
	// does not know: the effect may exist until an answer of its own
	// says it does.
	c.led.ambiguous = waited
	return waited, nil
}

// firstNumber returns the number of c's first attempt, admitted at now. It
// counts the attempts sent under its key by earlier calls. Those are a
// recent key of the application's (recentKeys) or an outer retry loop's
// count.
func (c *call) firstNumber(own bool, now time.Time) int {
	base := 0
	if own {
		base = c.t.recent.attempts(c.op.key, now)
	}
	cfg := &c.t.cfg
	if c.outer != nil || base > 0 || cfg.outer == outerAlways || cfg.outerHosts != nil || outerContexts.Load() {
		mode := c.outerMode()
		if c.loop != nil {
			base = max(base, c.loop.base)
		}
		c.outer, base = outerStart(c.outer, mode, base)
		if c.outer.sendsOne() {
			c.led.deferred(c.deferredBy())
		}
	}
	return base
}

// subjectOf returns what classify judges c's attempts against, once c's
// operation is resolved and its host known.
func (c *call) subjectOf() subject {
	return subject{ctx: c.ctx, key: c.op.key, unsafe: c.op.key != "" && !idempotentMethod(c.req.Method),
		own: c.op.own, cfg: &c.t.cfg, req: c.req, ev: &c.h.evidence}
}

// loop is the state of the retry loop between its steps.
type loop struct {
	a, prev  attempt // this iteration's attempt, and the one before
	v, prevV verdict // their verdicts
	res      reservation
	delay    time.Duration // the backoff before the next attempt
	base     int           // attempts sent under the key by earlier calls
	hedges   int           // hedges sent so far
}

// run is the retry loop, from the first attempt, admitted at now. The gate
// admits each attempt, send sends it (or a hedged round its copies), and
// settle settles it. The call ends with a definitive answer, or when the
// gate or next refuses another attempt.
func (c *call) run(l *loop, now time.Time) (*http.Response, error) {
	quick := c.unobserved()
	for i := 0; ; i++ {
		n := l.base + i
		if i > 0 {
			now = c.t.cfg.now()
		}
		if end, resp, err := c.admit(l, i, n, now); end {
			return resp, err
		}
		sent := 0 // hedges sent with this attempt (WithHedging)
		if i > 0 {
			l.prev, l.prevV = l.a, l.v
		}
		if hd := c.hedgeDelay(l.hedges); hd > 0 {
			l.a, l.v, sent = c.hedged(&l.res, i, n, c.t.cfg.hedge.max-l.hedges, hd)
			l.hedges += sent
		} else {
			t, snd := c.op.try(c.ctx, i, n, l.res.at, l.prev.resp), newSender(c.t, c.req, &c.op)
			snd.send(&l.a, &t)
			if i == 0 && quick && plainSuccess(l.a.resp, l.a.err) {
				return c.succeeded(&l.a, &l.res), nil
			}
			l.v = c.settle(&l.a, &l.res, l.res.delay)
		}
		if l.prev.resp != nil {
			if !l.a.sent {
				// The retry never left (its body could not be rewound):
				// the last answer stands, as the caller would have had it.
				return c.finish(&l.prev, l.prevV.d, ErrBodyNotReplayable)
			}
			drop(l.prev.resp) // the retry replaced it
		}
		if l.v.d.Action != Retry {
			return c.finish(&l.a, l.v.d, l.v.stop)
		}
		var err error
		if l.delay, err = c.next(n+sent+1, l.v.d, l.delay); err != nil {
			return c.finish(&l.a, l.v.d, err)
		}
		i += sent // hedges took the attempt numbers after n
	}
}

// admit has the gate admit attempt n, the i-th of c, at now. It reserves
// what the attempt takes without blocking, then waits. A retry refused at
// the reservation ends c with the last answer at once. end says that c
// ends, with resp or err: a refused retry, or a caller that gave up.
func (c *call) admit(l *loop, i, n int, now time.Time) (end bool, resp *http.Response, err error) {
	// polling: the last answer said the operation is in progress (a 409
	// from a call of the key in another process).
	polling := i > 0 && l.v.d.Category == CategoryInProgress
	if err := c.h.reserve(&l.res, &c.applicant, i, n, l.delay, polling, now); err != nil {
		resp, err = c.refuse(&l.a, l.v.d, err, false) // a retry refused before any wait
		return true, resp, err
	}
	if i > 0 {
		c.led.retrying(n, &l.a, l.v.d, l.res.delay)
		if l.a.resp != nil {
			keep(l.a.resp)
		}
	}
	if err := l.res.wait(&c.applicant); err != nil {
		if l.a.resp != nil && !errors.Is(err, c.ctx.Err()) {
			resp, err = c.finish(&l.a, l.v.d, err) // the retry was not sent: the last answer stands
			return true, resp, err
		}
		drop(l.a.resp)
		resp, err = c.refuse(&l.a, l.v.d, err, true)
		return true, resp, err
	}
	return false, nil, nil
}

// next returns the delay before retrying as attempt n after decision d. Or
// it returns why not to retry: attempts used up, a body that cannot be
// replayed, a server delay over the maximum. The gate decides the rest
// (deadline, tokens, breaker).
func (c *call) next(n int, d Decision, prev time.Duration) (time.Duration, error) {
	cfg := &c.t.cfg
	switch {
	case c.led.attempts >= cfg.maxAttempts, c.outer.sendsOne(), c.deferToSite():
		return 0, ErrRetriesExhausted // a single attempt's: the outer loop retries
	case !c.op.body.replayable():
		return 0, ErrBodyNotReplayable
	case d.Delay > cfg.retryAfterMax:
		return 0, ErrDelayTooLong
	}
	delay := d.Delay
	if cfg.backoff != nil {
		delay = max(delay, cfg.backoff.Delay(n, prev))
	}
	// A retry goes out after delay: the server must still hold its key.
	if err := c.op.keyAge(cfg, cfg.now().Add(delay)); err != nil {
		return 0, ErrKeyExpired
	}
	return delay, nil
}

// finish ends the call after attempt a, decided d. The caller's body is
// released and the Store records the outcome. The ledger returns a's
// response or an *Error. stop is why retries stopped, nil if d was final.
func (c *call) finish(a *attempt, d Decision, stop error) (*http.Response, error) {
	c.op.body.close()
	if d.Action == Retry || stop == ErrUnsafeRetry {
		c.failedRetryably(stop != ErrBodyNotReplayable) // loopsite.go: a loop may send it again
	}
	if c.t.cfg.store != nil {
		c.record(c.led.definitive(a, d))
	}
	return c.led.finish(a, d, stop, c.h, !c.op.body.replayable())
}

// fail returns the *Error for a call that stops before or between
// attempts. It records the operation as pending if anything was sent. It
// emits the outcome.
func (c *call) fail(reason error, cat Category, err error) error {
	c.led.identify(c.op.key)
	e := c.led.failure(reason, cat, err, c.h)
	if c.led.attempts > 0 {
		c.record(false)
	}
	c.led.failed(e)
	return e
}

// stopped ends the call when the gate refused to send an attempt after
// waiting for it. The previous response, if any, is gone. So the caller
// gets an *Error with the gate's reason and the last cause.
func (c *call) stopped(reason error) error {
	c.op.body.close()
	c.failedRetryably(true) // the last attempt failed retryably: a loop may send it again
	cat, last := stopCategory(reason)
	if last {
		return c.fail(reason, cat, c.led.lastErr)
	}
	return c.fail(reason, cat, reason)
}

// record tells the Store how c's operation ended (operation.record); the
// observers hear of a Store's error.
func (c *call) record(definitive bool) {
	if err := c.op.record(&c.t.cfg, c.ctx, definitive, c.led.attempts); err != nil {
		c.led.emit(Event{Kind: EventStore, Summary: Summary{Attempts: c.led.attempts}, Err: err})
	}
}

// refuse ends c when the gate refused to send its next attempt. waited
// says the refusal came after waiting for it. c ends with the previous
// attempt a's response or an *Error. An outer loop's SDK may honour a
// do-not-retry answer (outerCall.refuses). Its retry's *Error then becomes
// a refusal response that the SDK does not retry (see
// WithRefusalResponses).
func (c *call) refuse(a *attempt, d Decision, reason error, waited bool) (*http.Response, error) {
	var (
		resp *http.Response
		err  error
	)
	if waited {
		err = c.stopped(reason)
	} else {
		resp, err = c.finish(a, d, reason)
	}
	if err != nil && c.outer.refuses() {
		if r := refusalResponse(c.req, err, c.t.cfg.now()); r != nil {
			return r, nil
		}
	}
	return resp, err
}

// ended records what later calls read when c ends after attempt a. It
// records the attempts sent under a key of the application's (own) in
// recentKeys, after base earlier ones. It ends c's part in pendingCalls. A
// call answered with a success is not retried, so its key is no longer one
// a retry may continue. Then it ends c's turn for its key (flight.go).
func (c *call) ended(a *attempt, base int, own bool) {
	if own {
		c.t.recent.record(c.op.key, base+c.led.attempts, c.t.cfg.now())
	}
	if o := c.outer; o != nil && o.print != "" && a.resp != nil && a.resp.StatusCode >= 200 && a.resp.StatusCode < 300 {
		c.t.pending.forget(o.print, c.op.key)
	}
	c.loop.ended(&c.t.loops)
	if own {
		c.t.flights.release(c.op.key) // last: the next call reads the attempts recorded above
	}
}

// hedgeDelay returns how long to wait before hedging the call's next
// attempt, having sent hedges so far. It returns 0 if the attempt is not to
// be hedged.
func (c *call) hedgeDelay(hedges int) time.Duration {
	hg := c.t.cfg.hedge
	if hg == nil || hedges >= hg.max || c.op.key != "" || !c.op.body.replayable() || !hedgeMethod(c.req.Method) {
		return 0
	}
	return hg.after(c.h.latency.hist)
}

// hedged sends attempt n, the i-th of the call, admitted by res. While no
// definitive answer has come, it sends up to budget hedges, numbered n+1,
// n+2…. Each goes delay after the previous copy. Each copy runs in its own
// goroutine with its own context, a child of the caller's. Every copy is
// settled here. hedged returns the answer that ends the round, its verdict
// and the number of hedges sent.
//
// The first definitive answer wins. The other copies are cancelled and
// waited for, their answers noted and discarded. A copy may answer
// retryably, or with a server's refusal: a 5xx or 429 it says not to retry,
// such as pushback. While another copy is in flight, that answer is
// discarded and the round waits for the other copy. The round ends with the
// last answer when every copy failed and the timer has not sent another.
// Every goroutine of the round has ended when hedged returns. The winner's
// context is cancelled when its body is closed.
func (c *call) hedged(res *reservation, i, n, budget int, delay time.Duration) (attempt, verdict, int) {
	r := newHedgeRound(1+budget, delay)
	c.launch(r, *res, i, n, false, res.delay)
	r.arm()
	defer r.end()
	sent := 0
	var (
		last  attempt
		lastV verdict
	)
	for r.inflight > 0 {
		res, tick := r.next()
		if tick {
			if c.hedge(r, i+sent+1, n+sent+1, delay) {
				sent++
				if sent < budget {
					r.arm()
				}
			} // else not sent; the copies in flight go on
			continue
		}
		a, v, won := c.settleCopy(r, res)
		if won {
			return a, v, sent
		}
		last, lastV = a, v
	}
	return last, lastV, sent
}

// launch sends copy n of a hedged round, the i-th of the call, admitted by
// res. The copy runs in a goroutine and a context of its own.
func (c *call) launch(r *hedgeRound, res reservation, i, n int, hedge bool, wait time.Duration) {
	ctx, cancel := context.WithCancel(c.ctx)
	r.launch(hedgeCopy{res: res, cancel: cancel, n: n, hedge: hedge, wait: wait}, newSender(c.t, c.req, &c.op), c.op.try(ctx, i, n, res.at, nil))
}

// hedge sends hedge n, the i-th attempt of the call, of round r. It goes
// delay after the copy before it, if attempts are left and the gate admits
// it.
func (c *call) hedge(r *hedgeRound, i, n int, delay time.Duration) bool {
	if c.led.attempts+r.inflight >= c.t.cfg.maxAttempts {
		return false
	}
	res, err := c.h.reserveHedge(&c.applicant, c.t.cfg.now())
	if err != nil {
		return false
	}
	c.launch(r, res, i, n, true, delay)
	c.led.hedgeSent(n, delay)
	return true
}

// settleCopy settles the copy of round r that answered. It reports whether
// the copy won: the round ends with it, the other copies settled.
func (c *call) settleCopy(r *hedgeRound, res hedgeResult) (attempt, verdict, bool) {
	cp := &r.copies[res.k]
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
		c.led.note(&a, v.d, cp.wait, cp.hedge)
		c.keepCopy(&a, cp.cancel)
		return a, v, true
	}
	c.led.note(&a, v.d, cp.wait, cp.hedge)
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

// withdraw gives back what copy cp took: it never left (its body could
// not be rewound), and is not counted.
func (c *call) withdraw(cp *hedgeCopy) {
	cp.res.cancel()
	cp.cancel()
	c.led.hedgeWithdrawn(cp.n)
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
// won. It waits for each and settles it as a loser (judge). A copy
// cancelled because another answered is CategoryCanceled, neutral for the
// host. An answer that came anyway is discarded. Its failure counts against
// the host; its healthy answer earns no token.
func (c *call) settleLosers(r *hedgeRound) {
	r.cancelRest()
	for r.inflight > 0 {
		res := r.result()
		cp := &r.copies[res.k]
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
		c.led.note(&a, v.d, cp.wait, cp.hedge)
	}
}
