package resilient

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Transport is an http.RoundTripper that makes requests safe to retry.
//
// For each request (one logical operation) it chooses an idempotency key
// once, before the first attempt — the caller's header or ContextWithKey,
// the key a Store holds for a named operation, or a new UUIDv7 for POST and
// PATCH — and sends that same key on every attempt. It classifies each
// attempt's outcome (DefaultClassifier), waits with jittered backoff
// (FullJitter by default) but never less than a server-directed Retry-After
// and never past the context's deadline, and stops when attempts run out or
// the host's gate refuses the retry.
//
// Each destination host has a gate that admits every attempt. By default it
// never refuses or delays a first attempt — what a bare client would send is
// sent, so wrapping a client cannot make an operation fail that a single
// attempt would have completed — and it admits retries from the host's
// RetryTokens: a retry takes a token, a healthy answer earns half a token
// back, so retries fade as the failure rate grows and stop when everything
// fails. The host's routes (a method and the first two path segments) share
// its tokens fairly: a route takes at most the bucket's size beyond what its
// own healthy answers earn back, so a dead route does not starve the others.
// A 503 with Retry-After holds back the host's retries for that long, a 429
// with Retry-After its first attempts too (when the wait fits their
// deadline); while the host renews such a pause (an answer asks for one
// while one is on: it is shedding), retries are refused before any wait, and
// the caller has the last answer at once; a pause set or renewed while a
// retry waits does not drop it (the server's pushback, an opened breaker or
// a rate limit past the deadline still do). A Budget, a circuit breaker and
// a rate limit are opt-in (WithBudgetConfig, WithBreaker, WithRateLimit).
// Only outcomes that say the host is unhealthy (5xx, timeouts, resets) count
// against it.
//
// A retry that could not finish before the context's deadline (its wait
// and the host's usual attempt latency) is not started.
//
// Calls of one operation at the same time — one key of the application's:
// its header, ContextWithKey, a named operation in a Store — take turns: a
// call whose key is in flight on the Transport waits for that call to end,
// within its own context, then sends its own attempts, which a server that
// dedupes answers with the committed answer. The server never sees two
// attempts of one key at once from the Transport, and no call of it spends a
// retry token waiting out a 409 "in progress". A call whose context ends
// while it waits returns an *Error with the key and Unknown set, having sent
// nothing. A minted key is unique and never waits. A 409 "in progress" (the
// key's call in another process) is retried after the server's Retry-After,
// without a retry token.
//
// A request from an SDK that retries on its own (its marks say so, or
// WithOuterRetries) gets one attempt per RoundTrip: the SDK drives, the
// Transport keys its calls (one key per SDK call), numbers their attempts as
// the SDK does, and admits the SDK's retries through the gate, which may
// refuse them. See WithOuterRetries.
//
// The zero Transport is not usable; build one with NewTransport, or an
// *http.Client with NewClient or Wrap. A Transport is safe for concurrent
// use by multiple goroutines and should be reused: its per-host state only
// works if it is shared by the requests to a host. Per-host state is created
// on a host's first request and forgotten once the host has been idle for a
// window (10 s by default) with no pause pending and no breaker open, so
// memory follows the set of active hosts.
//
// A key the Transport adds is sent under the header's lower-case spelling
// ("idempotency-key") when the header is Idempotency-Key or
// X-Idempotency-Key: net/http re-sends by itself, after a reused connection
// dies, any request that carries one of them canonically spelled, and a POST
// re-sent after it was applied is a second effect on a server that ignores
// keys. The field is the same on the wire (names are case-insensitive;
// HTTP/2 lower-cases them); a base RoundTripper that reads it should look it
// up without regard to case. net/http's other re-sends (nothing written on a
// reused connection, an HTTP/2 stream the server refused or never processed)
// go ahead, as for a bare client, and are counted (Report.Resends).
//
// RoundTrip keeps the RoundTripper contract: it never modifies the caller's
// request (an attempt that adds to it — the key and attempt headers, a
// buffered body, an attempt timeout — is sent on a copy; an unkeyed first
// attempt with nothing to add is the request itself, as a bare client sends
// it); it takes its context from req.Context(); it closes the request body
// on every path; it returns a response or an error, never both. When the
// last attempt produced a response — a final 503 included — that response is
// returned with a nil error, so the caller sees the real status. Otherwise
// the error is an *Error whose Reason says why retries stopped and whose
// Unknown field says whether the effect may exist. Bodies of discarded
// responses are drained (at most 64 KiB, for at most 100 ms) and closed.
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

// call is the state of one RoundTrip, one part per step of the loop: the
// operation (resolved once), the host whose gate admits each attempt, and
// the ledger. Each attempt's result lives in the loop's iteration.
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
	// turn: c holds the turn of its key of the application's
	// (flight.go), released when c ends; joined: c waited for another
	// call of the key to end, and its first attempt is a first attempt of
	// its own, not a retry of that call's.
	turn   bool
	joined bool
	// polling: the last answer said the operation is in progress (a 409
	// from a call of the key in another process): the retry that polls
	// for its end is paced by the server's hint, and takes no retry token.
	polling bool
}

// RoundTrip sends req, retrying as configured. See Transport for the
// guarantees. Errors are *Error values; errors.Is works with ErrInvalidKey,
// ErrInvalidRequest, ErrBodyNotReplayable, ErrStore, ErrOperationMismatch,
// ErrKeyExpired, ErrCircuitOpen, ErrBudgetExhausted, ErrRetriesExhausted,
// ErrDelayTooLong and the context's errors.
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
	if own {
		if err := c.takeTurn(); err != nil {
			return nil, err
		}
	}
	now := t.cfg.now() // the first attempt's admission
	c.h = t.host(req.URL.Host, now)
	var l loop
	l.base = c.firstNumber(own, now)
	if own || c.outer != nil {
		// One defer: a second would cost every call the runtime's
		// deferreturn (too many returns for open-coded defers).
		defer c.ended(&l.a, l.base, own)
	}
	return c.run(&l, now)
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

// run is the retry loop, from the first attempt, admitted at now: the
// gate admits each attempt, send sends it (or a hedged round its copies),
// settle settles it, and the call ends with a definitive answer, or when
// the gate or next refuses another attempt.
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
			t, snd := c.try(c.ctx, i, n, l.res.at, l.prev.resp), c.sender()
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

// admit has the gate admit attempt n, the i-th of c, at now: it reserves
// what the attempt takes, without blocking (a retry refused then ends c
// with the last answer at once), then waits. end says that c ends, with
// resp or err: a refused retry, or a caller that gave up.
func (c *call) admit(l *loop, i, n int, now time.Time) (end bool, resp *http.Response, err error) {
	if i > 0 {
		c.polling = l.v.d.Category == CategoryInProgress
	}
	if err := c.h.reserve(&l.res, c, i, n, l.delay, now); err != nil {
		resp, err = c.refuse(&l.a, l.v.d, err, false) // a retry refused before any wait
		return true, resp, err
	}
	if i > 0 {
		c.retrying(n, &l.a, l.v.d, l.res.delay)
		if l.a.resp != nil {
			keep(l.a.resp)
		}
	}
	if err := l.res.wait(c); err != nil {
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

// settle settles attempt a, admitted by res, that waited wait: judge
// classifies it, releases res and has the host observe it, then the
// ledger notes it.
func (c *call) settle(a *attempt, res *reservation, wait time.Duration) verdict {
	v := c.judge(a, res, alone)
	c.note(a, v.d, wait, false)
	return v
}

// role is what else is in flight when an attempt is settled: a hedged
// round's copies (hedge.go) credit the host less than an attempt alone.
type role uint8

const (
	alone  role = iota // no other copy in flight
	racing             // other copies in flight: a refusal sheds this copy only
	loser              // another copy won: this one is cut short
)

// judge is settling's first part: classify judges attempt a; its
// reservation res is released with what a says of the host (cancelled if
// a never left); the host observes a. r lowers the credit of a hedged
// round's copies: a loser earns no token (the round's one healthy answer
// does, so that hedges cannot pay for themselves), and a copy the server
// sheds (pushback) while another is in flight says nothing of the host. A
// loser cut short without an answer is not classified: it is cancelled,
// and its time until then counts for the host's quantile, as a lower bound
// of what it would have taken, so that the slow answers hedging cuts short
// are not forgotten.
func (c *call) judge(a *attempt, res *reservation, r role) verdict {
	if r == loser && a.resp == nil {
		res.release(c, healthNeutral)
		if c.h.latency.hist != nil && a.sent {
			c.h.latency.hist.record(a.took)
		}
		return verdict{d: Decision{Action: Terminal, Category: CategoryCanceled}, err: a.err}
	}
	v := c.classify(a)
	a.err = v.err
	if !a.sent {
		res.cancel()
		return v
	}
	hl := healthOf(a.resp, a.err, v.d)
	switch {
	case r == loser && hl == healthOK, r == racing && v.d.Pushback && shed(a, v.d):
		hl = healthNeutral
	}
	res.release(c, hl)
	c.observe(a, v)
	return v
}

// observe tells the host what attempt a showed of it: its latency, a
// server-directed pause, and evidence that the server dedupes. A 429 with
// a delay holds back every request to the host, a 503 with one its
// retries, whether or not this request retries; pushback holds back its
// retries (for at most the Retry-After maximum).
func (c *call) observe(a *attempt, v verdict) {
	d := v.d
	if a.err == nil {
		c.h.latency.observe(a.took)
	}
	if v.shown {
		c.noteShown(a.end)
	}
	if d.Pushback && a.resp != nil {
		c.h.pauses.pushBack(a.end, min(d.Delay, c.t.cfg.retryAfterMax))
	}
	if a.resp == nil || d.Delay <= 0 || d.Delay > c.t.cfg.retryAfterMax {
		return
	}
	switch a.resp.StatusCode {
	case http.StatusTooManyRequests:
		c.h.pauses.pause(a.end, d.Delay, true)
	case http.StatusServiceUnavailable:
		c.h.pauses.pause(a.end, d.Delay, false)
	}
}

// unobserved reports whether nothing but the host, the key's evidence and
// an own key's attempt count (Transport.recent) learns from c's first
// attempt when it is a plain success: no Report, no Observer, no custom
// Classifier, no hedging (config.observed), and no Store record to finish.
// Such an attempt ends the call (call.succeeded).
func (c *call) unobserved() bool {
	return !c.t.cfg.observed && c.led.rep == nil && (c.op.name == "" || c.t.cfg.store == nil)
}

// succeeded ends c after its first attempt a, a plain success, when
// nothing observes c (call.unobserved): it does what classify, observe,
// note and finish would do for it that anything reads afterwards, without
// building their Decision, Report or Events. The classifier's answer is a
// success; the host hears a healthy answer and its latency; the answer to a minted key on an unsafe request may show that
// the server dedupes (call.noteShown records it, as observe would; an
// own key needs no evidence); the attempt is counted, for the recent
// attempts of an own key. The resends count, which only a Report or an
// Event would show, is not kept.
func (c *call) succeeded(a *attempt, res *reservation) *http.Response {
	res.release(c, healthOK)
	c.h.latency.observe(a.took)
	c.led.attempts++
	if c.op.key != "" && !c.op.own && !idempotentMethod(c.req.Method) &&
		showsDedupe(a.resp.Header, replayHeadersOf(a.resp.Header), c.t.cfg.keyHeader, c.op.key, Decision{Action: Success}) {
		c.noteShown(a.end) // all the guard does on a success
	}
	c.op.body.close()
	return a.resp
}

// next returns the delay before retrying as attempt n after decision d, or
// why not to retry: attempts used up, a body that cannot be replayed, a
// server delay over the maximum. The gate decides the rest (deadline,
// tokens, breaker).
func (c *call) next(n int, d Decision, prev time.Duration) (time.Duration, error) {
	cfg := &c.t.cfg
	switch {
	case c.led.attempts >= cfg.maxAttempts, c.single():
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
	if err := c.keyAge(cfg.now().Add(delay)); err != nil {
		return 0, ErrKeyExpired
	}
	return delay, nil
}
