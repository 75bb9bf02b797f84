package resilient

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/host"
	"github.com/resilienthttp/resilient/internal/loops"
	"github.com/resilienthttp/resilient/internal/wire"
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
	hosts  host.Table
	recent loops.Recent
	// flights: the calls of the application's keys in flight, so that
	// callers of one operation take turns (internal/loops, internal/loops/flight.go).
	flights loops.Flights
	keys    wire.KeySource
	// pending: the recent calls of outer retry loops that send no call id
	// (loops.go); touched by marked requests only.
	pending loops.Pending
	// loops: the recent retryable failures of calls without marks and
	// the call sites that loop (loops.go); written on failure only.
	loops loops.Sites
	// asked: the times servers named for outer loops' next tries
	// (loops.go, internal/loops asked.go).
	asked loops.Asked
	// plain: the configuration lets requests be plain calls (transport.go, the plain call).
	plain bool
	// wire: what sending an attempt needs (internal/wire, send.go), from cfg.
	wire wire.Settings
	// hc: how the hosts are configured (internal/host), from cfg.
	hc host.Config
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
	t.cfg.keyWire = wire.WireKey(t.cfg.keyHeader)
	t.cfg.clock = clock.New()
	if t.cfg.logger != nil {
		t.cfg.observers = append(t.cfg.observers, logObserver(t.cfg.logger))
	}
	t.cfg.observed = len(t.cfg.observers) > 0 || t.cfg.hedge != nil || t.cfg.customClassifier
	t.plain = t.cfg.plainCalls()
	t.wire = wire.Settings{Base: base, Clock: t.cfg.clock, AttemptTimeout: t.cfg.attemptTimeout, AttemptHeader: t.cfg.attemptHeader, KeyWire: t.cfg.keyWire, TimeBudget: t.cfg.timeBudget}
	t.hc = t.cfg.hostConfig()
	t.hosts.Cfg = &t.hc
	t.hosts.IdleAfter = int64(t.cfg.idleAfter())
	t.hosts.NextSweep.Store(t.cfg.nanos() + t.hosts.IdleAfter)
	return t
}

// loopsKnown reports whether t remembers a failure of a call without
// marks, or a call site that loops (loops.go).
func (t *Transport) loopsKnown() bool { return t.loops.N.Load() != 0 }

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
// gate (applicant). Each attempt's result lives
// in the loop's iteration.
type call struct {
	t *Transport
	// applicant: what the gate knows of c: the config (t's), the caller's
	// request and context, and, once c's first attempt is numbered, how
	// the call is driven.
	host.Applicant
	cfg *config // the Transport's
	op  operation
	h   *host.State
	led ledger
	// outer: what an outer retry loop's call needs (loops.go); nil
	// for a request without marks.
	outer *outerCall
	// loop: what a call without marks holds of a loop (loops.go),
	// nil until it fails or is recognised as a loop's re-send.
	loop *loops.Call
	// endsOnSuccess: nothing observes c (call.unobserved), so a plain
	// success of its first attempt ends it at once (call.succeeded).
	endsOnSuccess bool
}

// roundTrip sends req through the loop (call.run): the general path of
// RoundTrip, for a request that is not a plain call.
//
// hs is wire.CheckRequest's scan of req, if hs.Checked (a plain call that was not
// one).
func (t *Transport) roundTrip(req *http.Request, hs wire.HeaderScan) (*http.Response, error) {
	c := &call{t: t, cfg: &t.cfg, Applicant: host.Applicant{Cfg: &t.hc, Ctx: req.Context(), Req: req}}
	if err := c.resolve(hs); err != nil {
		return nil, err
	}
	own := c.op.own && !c.op.hop
	joined := false
	if own {
		// c holds the turn of its key (internal/loops, internal/loops/flight.go) until it ends (call.ended).
		var err error
		if joined, err = c.takeTurn(); err != nil {
			return nil, err
		}
	}
	now := t.cfg.nanos() // the first attempt's admission
	c.h = t.hosts.Host(req.URL.Host, now)
	var l loop
	l.base = c.firstNumber(own, now)
	c.Joined, c.Hop, c.Single = joined, c.op.hop, c.outer.sendsOne()
	if c.Single {
		c.Asked = c.askedBefore(now) // loops.go
		c.Unlinked = !c.outer.marked && !c.outer.lax
	}
	if own || c.outer != nil {
		c.Lax = c.outer != nil && c.outer.lax
		// One defer only (bench/README.md, "Why the hot path is written
		// this way").
		defer c.ended(&l.cur, l.base, own)
	}
	return c.run(&l, now, false)
}

// resolve resolves c's operation before anything is sent: its name, its
// key, its body (operation.prepare), and its claim in the Store. On error
// nothing was sent and the caller's body is closed; the error is the
// ledger's.
func (c *call) resolve(hs wire.HeaderScan) error {
	cfg := c.cfg
	op := &c.op
	op.name, _ = operationFromContext(c.Ctx)
	op.hop = c.Req.Response != nil
	c.led.start(cfg, c.Ctx, c.Req, op.name, reportFromContext(c.Ctx))
	// A redirect hop continues the operation with the key identity found;
	// it is not claimed again.
	claims := op.name != "" && cfg.store != nil && !op.hop
	var scan *call // the call to scan for a loop's re-send without marks (loops.go)
	if c.t.loopsKnown() && !op.hop && c.outerMode() == outerAuto {
		scan = c
	}
	o, f := op.prepare(cfg, c.Ctx, c.Req, hs, &c.t.keys, &c.t.pending, claims, scan)
	if f != nil {
		return c.fail(f.reason, f.cat, f.err)
	}
	c.outer = o
	if claims {
		if f := op.claim(cfg, c.Ctx, c.Req); f != nil {
			op.body.Close()
			return c.fail(f.reason, f.cat, f.err)
		}
	}
	// unsafe: a keyed request whose method is not idempotent. Its answers
	// may show that the server dedupes; its retry after an answer that may
	// have been applied needs evidence that it does (decide.go).
	op.unsafe = op.key != "" && !idempotentMethod(c.Req.Method)
	c.led.resolved(op.key, !op.body.Replayable())
	return nil
}

// takeTurn waits until c is the only call of its key in flight on the
// Transport. c's key is the application's. loops.Flights.Acquire gives the turn;
// call.ended ends it. takeTurn reports whether c joined another call of its
// key and waited for it to end. c's first attempt is then a first attempt of
// its own, not a retry of that call's. If c's context ends first, or its
// caller closes Request.Cancel, c ends with an *Error. Nothing was sent by
// c. The outcome is unknown, since the operation is in flight in this
// process.
func (c *call) takeTurn() (joined bool, err error) {
	waited, err := c.t.flights.Acquire(c.Ctx, c.Cancelled(), c.op.key)
	if err != nil {
		c.led.ambiguous = true
		c.op.body.Close()
		return false, c.fail(err, CategoryCanceled, loops.ErrInFlight)
	}
	// A call that waited follows one of its operation whose answer it
	// does not know: the effect may exist until an answer of its own
	// says it does.
	c.led.ambiguous = waited
	return waited, nil
}

// firstNumber returns the number of c's first attempt, admitted at now. It
// counts the attempts sent under its key by earlier calls. Those are a
// recent key of the application's (loops.Recent) or an outer retry loop's
// count.
func (c *call) firstNumber(own bool, now int64) int {
	base := 0
	if own {
		base = c.t.recent.Attempts(c.op.key, now)
	}
	cfg := c.cfg
	if c.outer != nil || base > 0 || cfg.outer == outerAlways || cfg.outerHosts != nil || outerContexts.Load() {
		mode := c.outerMode()
		if c.loop != nil {
			base = max(base, c.loop.Base)
		}
		c.outer, base = outerStart(c.outer, mode, base)
		if c.outer.sendsOne() {
			c.led.deferred(c.deferredBy())
		}
	}
	return base
}

// loop is the state of the retry loop between its steps.
type loop struct {
	cur, prev   wire.Attempt // this iteration's attempt, and the one before
	curV, prevV verdict      // their verdicts
	res         host.Reservation
	delay       time.Duration // the backoff before the next attempt
	base        int           // attempts sent under the key by earlier calls
	hedges      int           // hedges sent so far
}

// run is the retry loop, from the first attempt, admitted at now. Each
// attempt is, in order: admitted by the gate (reserved, then waited for),
// sent (or a hedged round of copies, hedge.go), settled (settle.go), and
// decided (decide.go). The decision reserves the retry, or names why the
// call ends. The call ends with a definitive answer, or when a limit or the
// gate refuses another attempt.
//
// handed: the plain call (sendPlain) sent the first attempt, and its answer
// was not a plain success. l holds the attempt and its reservation, and
// the loop starts at the attempt's settle step.
func (c *call) run(l *loop, now int64, handed bool) (*http.Response, error) {
	c.endsOnSuccess = c.unobserved()
	if !handed {
		var err error
		if l.res, err = c.h.Reserve(&c.Applicant, 0, l.base, 0, false, now); err != nil {
			return c.refuse(&l.cur, l.curV.d, err, false) // the first attempt refused before any wait
		}
	}
	for i := 0; ; i++ {
		n := l.base + i
		if i > 0 || !handed {
			if end, resp, err := c.admit(l, i, n); end {
				return resp, err
			}
		}
		sent := 0 // hedges sent with this attempt (WithHedging)
		if i > 0 {
			l.prev, l.prevV = l.cur, l.curV
		}
		if hd := c.hedgeDelay(l.hedges); hd > 0 {
			l.cur, l.curV, sent = c.hedged(&l.res, i, n, l.hedges, hd)
			l.hedges += sent
		} else {
			if i > 0 || !handed { // else sent by the plain call
				l.cur = c.op.send(c.t, c.Ctx, c.Req, i, n, l.res.At, l.prev.Resp)
			}
			var done bool
			if l.curV, done = c.settle(&l.cur, &l.res, alone, l.res.Delay, false, nil); done {
				return l.cur.Resp, nil
			}
		}
		if l.prev.Resp != nil {
			if !l.cur.Sent {
				// The retry never left (its body could not be rewound):
				// the last answer stands, as the caller would have had it.
				return c.finish(&l.prev, l.prevV.d, ErrBodyNotReplayable)
			}
			wire.Drop(l.prev.Resp) // the retry replaced it
		}
		i += sent // hedges took the attempt numbers after n
		f := c.facts(l, l.base+i+1)
		nx := decide(&f, c)
		if !nx.retry {
			return c.finish(&l.cur, l.curV.d, nx.stop)
		}
		l.delay = nx.delay
		// 4. the gate reserves the retry without blocking; a refused
		// retry ends c with the last answer at once.
		var err error
		if l.res, err = c.h.Reserve(&c.Applicant, i+1, l.base+i+1, nx.delay, nx.polling, c.cfg.nanos()); err != nil {
			return c.refuse(&l.cur, l.curV.d, err, false) // a retry refused before any wait
		}
	}
}

// admit waits for the gate to admit attempt n, the i-th of c, reserved
// (l.res) by the gate at the start of run or by the decision to retry. end
// says that c ends, with resp or err: a refused retry, or a caller that
// gave up.
func (c *call) admit(l *loop, i, n int) (end bool, resp *http.Response, err error) {
	if i > 0 {
		c.led.retrying(n, &l.cur, l.curV.d, l.res.Delay)
		if l.cur.Resp != nil {
			wire.Keep(l.cur.Resp)
		}
	}
	if err := l.res.Wait(&c.Applicant); err != nil {
		if l.cur.Resp != nil && !errors.Is(err, c.Ctx.Err()) {
			resp, err = c.finish(&l.cur, l.curV.d, err) // the retry was not sent: the last answer stands
			return true, resp, err
		}
		wire.Drop(l.cur.Resp)
		resp, err = c.refuse(&l.cur, l.curV.d, err, true)
		return true, resp, err
	}
	return false, nil, nil
}

// finish ends the call after attempt a, decided d. The caller's body is
// released and the Store records the outcome. The ledger returns a's
// response or an *Error. stop is why retries stopped, nil if d was final.
func (c *call) finish(a *wire.Attempt, d Decision, stop error) (*http.Response, error) {
	c.op.body.Close()
	if d.Action == Retry || stop == ErrUnsafeRetry {
		c.failedRetryably(stop != ErrBodyNotReplayable) // loops.go: a loop may send it again
	}
	if c.cfg.store != nil {
		c.record(c.led.definitive(a, d))
	}
	return c.led.finish(a, d, stop, c.h, !c.op.body.Replayable())
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
	c.op.body.Close()
	c.failedRetryably(true) // the last attempt failed retryably: a loop may send it again
	cat, last := stopCategory(reason)
	if last {
		return c.fail(reason, cat, c.led.lastErr)
	}
	err := reason
	if reason == c.Ctx.Err() {
		// The caller gave up: its cause, if it gave one, as a bare
		// client's http.Transport returns it (context.Cause).
		err = context.Cause(c.Ctx)
	}
	return c.fail(reason, cat, err)
}

// record tells the Store how c's operation ended (operation.record); the
// observers hear of a Store's error.
func (c *call) record(definitive bool) {
	if err := c.op.record(c.cfg, c.Ctx, definitive, c.led.attempts); err != nil {
		c.led.emit(Event{Kind: EventStore, Summary: Summary{Attempts: c.led.attempts}, Err: err})
	}
}

// refuse ends c when the gate refused to send its next attempt. waited
// says the refusal came after waiting for it. c ends with the previous
// attempt a's response or an *Error. An outer loop's SDK may honour a
// do-not-retry answer (outerCall.refuses). Its retry's *Error then becomes
// a refusal response that the SDK does not retry (see
// WithRefusalResponses).
func (c *call) refuse(a *wire.Attempt, d Decision, reason error, waited bool) (*http.Response, error) {
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
		if r := refusalResponse(c.Req, err, c.cfg.now()); r != nil {
			return r, nil
		}
	}
	return resp, err
}

// ended records what later calls read when c ends after attempt a. It
// records the attempts sent under a key of the application's (own) in
// loops.Recent, after base earlier ones. It ends c's part in the pending calls (loops.Pending). A
// call answered with a success is not retried, so its key is no longer one
// a retry may continue. Then it ends c's turn for its key (internal/loops, internal/loops/flight.go).
func (c *call) ended(a *wire.Attempt, base int, own bool) {
	if own {
		c.t.recent.Record(c.op.key, base+c.led.attempts, c.cfg.nanos())
	}
	if o := c.outer; o != nil && o.print != "" && a.Resp != nil && a.Resp.StatusCode >= 200 && a.Resp.StatusCode < 300 {
		c.t.pending.Forget(o.print, c.op.key)
	}
	c.loop.Ended(&c.t.loops)
	if own {
		c.t.flights.Release(c.op.key) // last: the next call reads the attempts recorded above
	}
}

// RoundTrip sends req, retrying as configured. See Transport for the
// guarantees. Errors are *Error values. errors.Is matches them against these
// sentinels and the context's errors:
//
//	ErrInvalidKey, ErrInvalidRequest, ErrBodyNotReplayable, ErrStore,
//	ErrOperationMismatch, ErrKeyExpired, ErrCircuitOpen, ErrTokensExhausted,
//	ErrBudgetExhausted, ErrRetriesExhausted, ErrDelayTooLong, ErrRateLimited
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A plain call (transport.go, the plain call) sends its first attempt without the loop's
	// state; any other request goes through the loop (roundTrip).
	var (
		resp *http.Response
		err  error
		ok   bool
		hs   wire.HeaderScan // the header's scan, made once
	)
	if t.plain {
		resp, err, ok = t.sendPlain(req, &hs)
	}
	if !ok {
		resp, err = t.roundTrip(req, hs)
	}
	if err != nil && t.cfg.refusalResponses {
		if r := refusalResponse(req, err, t.cfg.now()); r != nil {
			return r, nil
		}
	}
	if err == nil && (resp.ContentLength >= minResumable || resp.ContentLength < 0) && req.Method == http.MethodGet {
		if resp.ContentLength < 0 {
			t.streamable(req, resp) // eventstream.go
		} else {
			t.resumable(req, resp) // resume.go
		}
	}
	return resp, err
}

// NewClient returns a new *http.Client whose Transport is a Transport over
// http.DefaultTransport configured by opts. It sets no overall Timeout: bound
// each request with its context (the Transport never sleeps past the
// context's deadline), and each attempt with WithAttemptTimeout.
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: NewTransport(nil, opts...)}
}

// Wrap returns a copy of c whose Transport is a Transport over c's Transport
// (http.DefaultTransport if nil), configured by opts. c is not modified.
// Redirect policy, cookie jar and Timeout are kept. Note that c.Timeout
// bounds the whole request, retries and waits included. When it fires,
// http.Client replaces the error with its own timeout error. errors.As then
// no longer finds the *Error (its Key and Unknown). Prefer a context
// deadline.
func Wrap(c *http.Client, opts ...Option) *http.Client {
	if c == nil {
		return NewClient(opts...)
	}
	cp := *c
	cp.Transport = NewTransport(c.Transport, opts...)
	return &cp
}

// A plain call is the common request: one the Transport sends as is, or
// with only the key it mints added, and that nothing watches (no
// Observer, Report, hedging, custom Classifier or named operation). It has
// no key of the application's, no attempt header, no outer retry loop in
// sight, and a body that is none or the caller's to rewind (GetBody). Its
// host has no pause, rate limiter or breaker to pass. Its first attempt is
// the loop's first attempt (call.run), step for step: the same operation
// (resolved as call.resolve resolves it), the same admission (reservation
// reset and sizes), the same send (sendAsIs, or the plan and the sender),
// and on a plain success the same settlement (operation.succeeded). What
// it skips is the loop's state, which a plain success never reads: the
// call, the loop and the ledger are built only for any other answer. That
// answer is handed to the loop at its settle step, with the state the loop
// would have built (Transport.handOff), as if the loop had sent it.
// plain_internal_test.go checks the two paths against each other.

// plainBody reports whether req's body may be a plain call's: none, or one
// the caller can rewind (GetBody), which nothing is read from before the
// send.
func plainBody(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// sendPlain sends req as a plain call, if it is one. ok is false when it
// is not; nothing was sent then, and the loop sends it, with *hs, the scan
// of req's header if sendPlain made one (hs.checked). Else sendPlain
// returns the call's outcome, the loop's if the first answer was not a
// plain success. Its guards are the one test of a plain call, with
// t.plain, the configuration's (config.plainCalls), which RoundTrip reads.
func (t *Transport) sendPlain(req *http.Request, hs *wire.HeaderScan) (resp *http.Response, err error, ok bool) {
	if !plainBody(req) {
		return nil, nil, false // a body the Transport must read to send it again
	}
	ctx := req.Context()
	//lint:ignore SA1019 a field net/http still honours: the loop's admission does (Applicant.Gone)
	if name, _ := operationFromContext(ctx); name != "" || req.Response != nil || req.Cancel != nil || outerContexts.Load() || t.loopsKnown() {
		return nil, nil, false // a named operation, a redirect hop, a Request.Cancel, a loop in sight
	}
	if _, keyed := keyFromContext(ctx); keyed || reportFromContext(ctx) != nil {
		return nil, nil, false
	}
	if *hs, err = wire.CheckRequest(req, t.cfg.keyHeader, t.cfg.attemptHeader); err != nil || hs.Alt != "" || hs.Marked || hs.AttemptSet {
		return nil, nil, false // the loop's to refuse, or to send with what it carries
	}
	now := t.cfg.nanos() // the first attempt's admission
	h := t.hosts.Host(req.URL.Host, now)
	if h.Pauses.PauseUntil.Load() != 0 || h.Limiter != nil || h.Breaker != nil || ctx.Err() != nil {
		return nil, nil, false // something to admit it through, or a caller gone (Applicant.Gone, without Request.Cancel)
	}
	// The operation, as call.resolve resolves it (operation.prepare): a
	// key minted for the key methods, the body as it is.
	var op operation
	if t.cfg.keyMethods.HasBit(hs.Method, req.Method) {
		k, err := t.keys.Mint()
		if err != nil {
			return nil, nil, false // the loop mints again, and refuses the call if that fails too
		}
		op = operation{key: k, unsafe: !idempotentMethod(req.Method)}
	}
	if req.Body != nil {
		op.body.Init(ctx, req, t.cfg.maxBodyBuffer, false) // http.NoBody, or GetBody's: nothing to read, so no error
	}
	op.asIs, op.clipped = op.key == "", hs.Clipped // a plainBody is the caller's own (wire.ReplayBody.Callers)
	g := host.Applicant{Cfg: &t.hc, Ctx: ctx, Req: req}
	var (
		a wire.Attempt
		r host.Reservation
	)
	r.Reset(h, now, false, true, false)
	r.Sizes()
	// operation.send, spelled out: a call here would cost the GET path.
	if op.asIs {
		op.sendAsIs(t, req, &a, 0, now)
	} else {
		op.sendCopy(t, ctx, req, 0, 0, now, nil, &a)
	}
	if plainSuccess(a.Resp, a.Err) {
		if op.asIs {
			h.Succeeded(&g, &a, &r) // operation.succeeded's part: the body went with the request, and no key was sent
		} else {
			op.succeeded(&t.cfg, h, &g, &a, &r)
		}
		return a.Resp, nil, true
	}
	resp, err = t.handOff(&g, h, &op, &a, &r)
	return resp, err, true
}

// handOff hands a plain call of op whose first attempt a, admitted by r to
// h, got another answer than a plain success to the loop. The call is as
// call.resolve and Transport.roundTrip build it for the request: unnamed,
// unobserved, keyed by the Transport if at all, its own first attempt
// (numbered 0), with no outer loop.
func (t *Transport) handOff(g *host.Applicant, h *host.State, op *operation, a *wire.Attempt, r *host.Reservation) (*http.Response, error) {
	c := &call{t: t, cfg: &t.cfg, Applicant: *g, h: h, op: *op}
	c.led.start(&t.cfg, g.Ctx, g.Req, "", nil)
	c.led.resolved(op.key, !op.body.Replayable())
	var l loop
	l.cur, l.res = *a, *r
	return c.run(&l, r.At, true)
}
