package resilient

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/reason"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/sony/gobreaker/v2"
)

// The gate admits each attempt to its host, through the host's policies in
// order: the server's pushback (retries only), the server-directed pause,
// the rate limiter, the circuit breaker,
// the retry tokens and the budget. Admission is two steps, in the spirit of
// rate.Reservation: reserve decides without blocking (so a refused retry
// costs no wait, and the caller can still be given the last response) and
// takes what a retry costs; wait then sleeps the backoff and passes the
// policies that act at send time. The reservation is released exactly once:
// by release with the attempt's health once it was sent, or by cancel when
// it was not (which gives back what it took).
//
// First attempts are never refused or held back by the retry control
// (tokens, budget): what a bare client would send is sent. Only a pause
// after a 429 (when it fits the deadline), a rate limit and a classic
// breaker, all configured by the application, act on them.

// applicant is what the gate knows of the call whose attempts it admits.
// A call embeds it (transport.go) and fills it once per call.
type applicant struct {
	// hc is the Transport's configuration of its hosts.
	hc *hostConfig
	// ctx is the caller's: its deadline bounds the waits, its end ends
	// them.
	ctx context.Context
	// req is the caller's request: its route shares the host's retry
	// tokens (routeshare.go).
	req *http.Request
	// joined: the call waited for its key's call in flight (flight.go):
	// its first attempt is a first attempt of its own, not a retry.
	joined bool
	hop    bool // a redirect hop: not a new operation
	// single: the call sends one attempt, an outer loop retrying
	// (outerloop.go): the loop waits as it chooses, save for the server's
	// delay (outerWait). lax: its attempt is never refused (loopsite.go).
	single, lax bool
	// asked (Unix ns): the time the server named for the operation's next
	// try, 0 if none (serverasked.go). unlinked: an outer loop's call
	// that nothing ties to an earlier one (WithOuterRetries(true) without
	// marks): it may be a retry, and waits as one (outerWait).
	asked    int64
	unlinked bool
	// cold: the retry waits out a 503's Retry-After on a host with too
	// few first attempts to tell whether it sheds (firsts.coldWait). It
	// is judged again when the wait ends (reservation.wait).
	cold bool
}

// reservation is one attempt's admission.
type reservation struct {
	h        *hostState
	retry    bool          // attempt n > 0 of the operation
	first    bool          // the first attempt of this RoundTrip call
	hop      bool          // a redirect hop: not a new operation
	delay    time.Duration // the wait before sending, backoff and pause
	token    bool          // a retry token was taken
	share    *routeShare   // the route's share the token was also taken from; nil if none
	budgetAt int64         // when the budget paid for the retry (Unix ns), if budgeted
	budgeted bool
	done     func(error) // the breaker's, nil if none or uncounted
	released bool
	// at is the time of the latest admission step: the reservation's, then
	// the time wait returned at, which is when the attempt starts. Read
	// again only after something may have blocked, so that an attempt
	// that waits for nothing reads the clock once before it is sent.
	at int64 // Unix ns, by the Transport's clock
}

// health is what an attempt's outcome says about its host.
type health uint8

const (
	healthNeutral health = iota // says nothing: a cancelled caller, a 409 in progress, a 429 with a delay
	healthOK                    // the host answered as it should (2xx–4xx)
	healthFailure               // the host is unhealthy: 5xx, timeout, reset, refused
)

// reserve decides at now, into r, whether attempt n of g may be sent after
// at least backoff, without blocking. For a retry it checks that the wait
// and the host's usual latency fit before the deadline. It checks that the
// breaker is not open. Then it takes a retry token and the budget's share.
// A retry polling for the end of an operation in progress elsewhere
// (polling) takes no token. An error is the reason the retry is refused;
// nothing was taken.
func (h *hostState) reserve(r *reservation, g *applicant, i, n int, backoff time.Duration, polling bool, now int64) error {
	// A call that waited for its key's call in flight (applicant.joined)
	// sends its first attempt as a first attempt: it retries nothing.
	r.reset(h, now, n > 0 && (i > 0 || !g.joined), i == 0, g.hop)
	r.delay = 0
	if r.first && r.retry && g.single && !g.lax {
		var err error
		r.delay, err = h.reserveOuterRetry(r, g, now)
		return err
	}
	if r.first {
		// A 429's pause holds first attempts too, when it fits; when it
		// does not, the attempt goes out as a bare client's would.
		switch {
		case !g.single:
			if p := h.pauses.pausedFor(now, false); p > 0 && g.fits(now, p) {
				r.delay = p
			}
		case r.retry || g.lax || g.unlinked:
			r.delay = h.outerWait(g, now) // a loop's re-send: as the loop chose, and the server asked
		}
		// An outer retry loop's call (the key's attempt n > 0) is a retry:
		// it spends a token when there is one, so that the retries inside
		// it are held to the budget; it is never refused, as a bare
		// client's call would not be. (An outer loop's retry that the gate
		// governs, outerloop.go, is admitted below as any retry.)
		if r.retry && h.tokens != nil && h.tokens.TakeAtNanos(now) {
			r.took(nil)
		}
		return nil
	}
	if h.pauses.pushedBack(now) {
		return reason.ErrPushback
	}
	if h.pauses.shedding(now) {
		return reason.ErrDelayTooLong
	}
	r.delay = max(backoff, h.pauses.pausedFor(now, true))
	if !g.fits(now, r.delay+g.expectedLatency(h)) {
		return reason.ErrDelayTooLong
	}
	if h.breaker != nil && h.breaker.State() == gobreaker.StateOpen {
		return reason.ErrCircuitOpen
	}
	if polling {
		// The operation is in progress elsewhere (a 409 from the call of
		// another process): the host is fine, and the retry polls for the
		// operation's end at the pace of the server's Retry-After (its
		// delay covers it), within the attempts and the deadline. It
		// takes no retry token, as its answer earns none; a Budget, set
		// by the application, still pays for it.
		if !r.withdraw(now) {
			return reason.ErrBudgetExhausted
		}
		return nil
	}
	return r.spend(g, now)
}

// reserveOuterRetry admits into r, at now, the attempt of g, an outer loop's
// retry, or refuses it; it returns the attempt's delay. It applies the gate's policies for a retry, but not
// the backoff: the loop waited as it chose. It waits what is left of the
// server's delay (outerWait) rather than refuse: a refusal is an error the
// loop retries at once.
func (h *hostState) reserveOuterRetry(r *reservation, g *applicant, now int64) (time.Duration, error) {
	if h.pauses.pushedBack(now) {
		return 0, reason.ErrPushback
	}
	wait := h.outerWait(g, now)
	if !g.fits(now, wait+g.expectedLatency(h)) {
		wait = 0 // the server's time and an answer do not fit: the attempt goes as the loop sends it
	}
	if !g.fits(now, g.expectedLatency(h)) {
		return 0, reason.ErrDelayTooLong
	}
	if h.breaker != nil && h.breaker.State() == gobreaker.StateOpen {
		return 0, reason.ErrCircuitOpen
	}
	return wait, r.spend(g, now)
}

// reset makes r a new reservation at now to h. It is of a retry (attempt
// n > 0 of the operation) if retry. It is of the first attempt of this
// RoundTrip call if first, of a redirect hop if hop. reserve sets its
// delay. It sets
// the fields one by one (bench/README.md, "Why the hot path is written
// this way").
func (r *reservation) reset(h *hostState, now int64, retry, first, hop bool) {
	r.h, r.done, r.at = h, nil, now
	r.retry, r.first, r.hop, r.token, r.released = retry, first, hop, false, false
	r.budgetAt, r.budgeted, r.share = 0, false, nil
}

// spend takes what a retry (or a hedge) of g costs at now: a retry token,
// from the host's bucket and from the share of g's route (routeshare.go),
// and the budget's share. On error (reason.ErrTokensExhausted, reason.ErrBudgetExhausted)
// nothing is held.
func (r *reservation) spend(g *applicant, now int64) error {
	h := r.h
	if h.tokens != nil {
		s, ok := h.shares.take(routeOf(g.req), h.tokens.capacity(now))
		if !ok {
			return reason.ErrTokensExhausted
		}
		if !h.tokens.TakeAtNanos(now) {
			if s != nil {
				h.shares.give(s, tokenUnit)
			}
			return reason.ErrTokensExhausted
		}
		r.took(s)
	}
	if !r.withdraw(now) {
		r.cancel()
		return reason.ErrBudgetExhausted
	}
	return nil
}

// took records that r took a retry token, from the share s of its route
// too unless s is nil.
func (r *reservation) took(s *routeShare) {
	r.token, r.share = true, s
}

// withdraw has the host's budget, if it has one, pay for r's retry at now,
// and reports whether it did.
func (r *reservation) withdraw(now int64) bool {
	if r.h.budget == nil {
		return true
	}
	if !r.h.budget.WithdrawAt(clock.Wall(now)) {
		return false
	}
	r.budgetAt, r.budgeted = now, true
	return true
}

// wait sleeps the reservation's delay, then passes the policies that act at
// send time: a pause that began meanwhile, the rate limiter, the breaker.
// On error the reservation is cancelled; the error is the reason (a
// sentinel, the context's error, or errRequestCanceled).
//
// r.at is then when the attempt starts.
func (r *reservation) wait(g *applicant) error {
	if r.delay > 0 {
		if err := sleep(g.ctx, g.cancelled(), r.delay); err != nil {
			r.cancel()
			return err
		}
		r.at = g.hc.clock.Nanos()
	} else if err := g.gone(); err != nil {
		r.cancel()
		return err
	}
	h := r.h
	if !r.first && h.pauses.pushbackUntil.Load() != 0 {
		// The server pushed back while the retry waited its backoff.
		if now := g.hc.clock.Nanos(); h.pauses.pushedBack(now) {
			r.at = now
			r.cancel()
			return reason.ErrPushback
		}
	}
	if g.cold && !r.first {
		// The first attempts sent while a cold host's retry waited may
		// show that the host sheds: the retry is not sent (see observe).
		g.cold = false
		if now := g.hc.clock.Nanos(); h.firstsShedding(now) {
			r.at = now
			r.cancel()
			return reason.ErrDelayTooLong
		}
	}
	if r.first && h.pauses.pauseUntil.Load() != 0 && !g.single {
		waited, at, err := r.waitPause(g)
		if err != nil {
			r.cancel()
			return err
		}
		r.delay, r.at = r.delay+waited, at
	}
	if h.limiter != nil {
		if err := h.limiter.Wait(g.ctx); err != nil {
			r.cancel()
			if ctxErr := g.ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return reason.ErrRateLimited // the limiter refuses waits past the deadline
		}
		r.at = g.hc.clock.Nanos()
	}
	if h.breaker != nil {
		if err := r.allow(g, r.first && g.hc.retriesOnly); err != nil {
			r.cancel()
			return err
		}
	}
	if !r.retry && !r.hop {
		r.sizes()
	}
	return nil
}

// waitPause waits out, for a first attempt, a 429's pause set or renewed
// while it waited, when it fits the deadline.
//
// A retry is not held here: it waited out the pause it knew of (reserve
// made its delay cover it), and one set or renewed meanwhile by another
// answer does not drop it: a retry that waited is sent, never slept for
// and then dropped (one bad backend behind a load balancer renews the
// host's pause all the time). A host that keeps renewing its pause is
// shedding: reserve refuses its retries before any wait. A call an outer
// retry loop drives waits for nothing of the Transport's.
//
// It returns how long it waited, and when it returned.
func (r *reservation) waitPause(g *applicant) (time.Duration, int64, error) {
	h := r.h
	now := g.hc.clock.Nanos()
	h.pauses.clearPauses(now)
	if p := h.pauses.pausedFor(now, false); p > 0 && g.fits(now, p) {
		if err := sleep(g.ctx, g.cancelled(), p); err != nil {
			return 0, now, err
		}
		return p, g.hc.clock.Nanos(), nil
	}
	return 0, now, nil
}

// allow passes the host's breaker (the host has one): an open breaker
// refuses (reason.ErrCircuitOpen), unless uncounted, which sends the attempt
// uncounted (a retries-only breaker never holds back a first attempt).
func (r *reservation) allow(g *applicant, uncounted bool) error {
	h := r.h
	done, err := h.breaker.Allow()
	h.dispatchTransitions(g.hc)
	switch {
	case err == nil:
		r.done = done
	case !uncounted:
		return reason.ErrCircuitOpen
	}
	return nil
}

// sizes has a first attempt of an operation (not a redirect hop, not an
// outer retry loop's retry), starting at r.at, size the retry tokens and
// the budget.
func (r *reservation) sizes() {
	if r.h.tokens != nil {
		r.h.tokens.FirstAtNanos(r.at)
	}
	if r.h.budget != nil {
		r.h.budget.DepositAt(clock.Wall(r.at))
	}
}

// settled marks r released, and reports whether it was not yet: a
// reservation is released once.
func (r *reservation) settled() bool {
	if r.released {
		return false
	}
	r.released = true
	return true
}

// cancel releases a reservation whose attempt was not sent: what the retry
// took is given back, and the breaker does not count it.
func (r *reservation) cancel() {
	if !r.settled() {
		return
	}
	if r.token {
		r.h.tokens.Refund()
		if r.share != nil {
			r.h.shares.give(r.share, tokenUnit)
		}
	}
	if r.budgeted {
		r.h.budget.RefundAt(clock.Wall(r.budgetAt))
	}
	if r.done != nil {
		r.done(errBreakerExcluded)
	}
}

// release releases the reservation of an attempt of g that was sent, with
// what its outcome says of the host.
func (r *reservation) release(g *applicant, hl health) {
	if !r.settled() {
		return
	}
	h := r.h
	if hl == healthOK && h.tokens != nil {
		h.tokens.Earn()
		if h.shares.owing.Load() != 0 {
			h.shares.earn(routeOf(g.req), h.tokens.params().refill)
		}
	}
	if r.done != nil {
		switch hl {
		case healthOK:
			r.done(nil)
		case healthFailure:
			r.done(errBreakerFailure)
		default:
			r.done(errBreakerExcluded)
		}
		h.dispatchTransitions(g.hc)
	}
}

// (removed) reports whether the host's breaker holds back
// retries only (BreakerConfig.RetriesOnly).

// expectedLatency is how long an attempt to h usually takes, bounded by the
// attempt timeout.
func (g *applicant) expectedLatency(h *hostState) time.Duration {
	d := time.Duration(h.latency.avg.Load())
	if at := g.hc.attemptTimeout; at > 0 {
		d = min(d, at)
	}
	return d
}

// fits reports whether waiting d from now leaves time before the caller's
// deadline.
func (g *applicant) fits(now int64, d time.Duration) bool {
	dl, ok := g.ctx.Deadline()
	return !ok || clock.Later(now, d) < retrycontrol.UnixNanos(dl)
}

// sleep waits d or until ctx is done or cancel closed (a nil cancel never
// is), whichever is first.
func sleep(ctx context.Context, cancel <-chan struct{}, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-cancel:
		return errRequestCanceled
	}
}

// errRequestCanceled is why a call ends when its caller closed the
// request's Cancel channel: net/http's own words for it.
var errRequestCanceled = errors.New("net/http: request canceled")

// cancelled returns the caller's Request.Cancel, nil if none (or if g has
// no request: the gate's own tests admit without one). It is deprecated,
// but http.Transport honours it as it honours the context, so the
// Transport's waits do too: a caller that closed it is gone, and no retry
// is sent for it.
func (g *applicant) cancelled() <-chan struct{} {
	if g.req == nil {
		return nil
	}
	return g.req.Cancel //lint:ignore SA1019 a field net/http still honours
}

// gone returns why the caller gave up, nil if it has not: its context's
// error, or errRequestCanceled once it closed Request.Cancel.
func (g *applicant) gone() error {
	if err := g.ctx.Err(); err != nil {
		return err
	}
	if c := g.cancelled(); c != nil {
		select {
		case <-c:
			return errRequestCanceled
		default:
		}
	}
	return nil
}

// reserveHedge admits a hedge to h at now, as reserve and wait admit a retry
// sent at once, except that it never waits. These refuse it: the server's
// pushback, a host paused by a Retry-After, an open breaker, an empty token
// bucket or budget, a rate limiter without a token at hand, or a deadline
// too close. The error says why, and nothing is held. The reservation is
// released like a retry's.
func (h *hostState) reserveHedge(g *applicant, now int64) (reservation, error) {
	r := reservation{h: h, retry: true, at: now}
	switch {
	case h.pauses.pushedBack(now):
		return r, reason.ErrPushback
	case h.pauses.pausedFor(now, true) > 0, g.asked > now, !g.fits(now, g.expectedLatency(h)):
		return r, reason.ErrDelayTooLong // a pause, or the delay a copy's answer named (serverasked.go)
	case h.breaker != nil && h.breaker.State() == gobreaker.StateOpen:
		return r, reason.ErrCircuitOpen
	}
	if err := r.spend(g, now); err != nil {
		return r, err
	}
	if h.limiter != nil && !h.limiter.AllowN(clock.Wall(now), 1) {
		r.cancel()
		return r, reason.ErrDelayTooLong
	}
	if h.breaker != nil {
		if err := r.allow(g, false); err != nil {
			r.cancel()
			return r, err
		}
	}
	return r, nil
}

// outerWait returns how long an outer loop's re-send of g waits at now for
// what the server asked: the host's pause (a 429's, or a 503's for
// retries) and the operation's own delay (g.asked). It is 0 when that does
// not fit before the deadline: the attempt then goes as the loop sends
// it. A pushback is not waited: it asks for no retry (reserveOuterRetry
// refuses it).
func (h *hostState) outerWait(g *applicant, now int64) time.Duration {
	p := h.pauses.pausedFor(now, true)
	if g.asked > now {
		p = max(p, time.Duration(g.asked-now))
	}
	if p > 0 && g.fits(now, p) {
		return p
	}
	return 0
}
