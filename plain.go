package resilient

import (
	"net/http"

	"golang.org/x/time/rate"
)

// A plain call is the common request: one the Transport sends as is, with
// nothing to add (no key, no attempt header, no body to keep) and nothing
// to watch it (no Observer, Report, hedging, custom Classifier or named
// operation), with no outer retry loop in sight, to a host with no pause,
// rate limiter or breaker to pass. Its first attempt is the loop's first
// attempt (call.run), step for step: the same admission (reservation
// reset and sizes), the same send (operation.sendAsIs), and on a plain
// success the same settlement (hostState.succeeded). What it skips is the
// loop's state, which a plain success never reads: the call, the loop and
// the ledger are built only for any other answer. That answer is handed to
// the loop at its settle step, with the state the loop would have built
// (call.resume), as if the loop had sent it. plain_internal_test.go checks
// the two paths against each other.

// plainCalls reports whether cfg lets a request be a plain call: nothing
// observes its attempts, and no rate limiter, breaker, attempt timeout,
// hedging or outer loop setting applies to every call.
func (c *config) plainCalls() bool {
	return !c.observed && c.breaker == nil && c.rateLimit == rate.Inf && c.attemptTimeout == 0 &&
		c.hedge == nil && c.outer != outerAlways && c.outerHosts == nil
}

// sendPlain sends req, which has no body, as a plain call, if it is one.
// ok is false when it is not; nothing was sent then, and the loop sends
// it. Else sendPlain returns the call's outcome, the loop's if the first
// answer was not a plain success. (roundTrip tries it for a request
// without a body, when t.plain.)
func (t *Transport) sendPlain(req *http.Request) (resp *http.Response, err error, ok bool) {
	if req.Response != nil || outerContexts.Load() || t.loopsKnown() {
		return nil, nil, false
	}
	ctx := req.Context()
	if name, _ := operationFromContext(ctx); name != "" {
		return nil, nil, false
	}
	if _, keyed := keyFromContext(ctx); keyed || reportFromContext(ctx) != nil {
		return nil, nil, false
	}
	hs, err := checkRequest(req, t.cfg.keyHeader, t.cfg.attemptHeader)
	if err != nil || hs.alt != "" || hs.marked || hs.attemptSet || t.cfg.keyMethods.hasBit(hs.method, req.Method) {
		return nil, nil, false // the loop's to refuse, or a key to send
	}
	now := t.cfg.nanos() // the first attempt's admission
	h := t.host(req.URL.Host, now)
	if h.pauses.pauseUntil.Load() != 0 || h.limiter != nil || h.breaker != nil || ctx.Err() != nil {
		return nil, nil, false
	}
	g := applicant{cfg: &t.cfg, ctx: ctx, req: req}
	var (
		a attempt
		r reservation
	)
	r.reset(h, now, false, true, false)
	r.sizes()
	sendAsIs(t, req, &a, 0, now) // no body: nothing for the operation to hand over
	if plainSuccess(a.resp, a.err) {
		h.succeeded(&g, &a, &r)
		return a.resp, nil, true
	}
	resp, err = t.resume(&g, h, hs, &a, &r)
	return resp, err, true
}

// resume hands a plain call whose first attempt a, admitted by r to h, got
// another answer than a plain success to the loop. The call is as
// call.resolve and Transport.roundTrip build it for the request: unkeyed,
// unnamed, unobserved, sent as is, its own first attempt (numbered 0), with
// no outer loop.
func (t *Transport) resume(g *applicant, h *hostState, hs headerScan, a *attempt, r *reservation) (*http.Response, error) {
	c := &call{t: t, applicant: *g, h: h}
	c.op.asIs, c.op.clipped = true, hs.clipped
	c.led.start(&t.cfg, g.ctx, g.req, "", nil)
	c.led.resolved("", !c.op.body.replayable())
	var l loop
	l.cur, l.res = *a, *r
	return c.run(&l, r.at, true)
}
