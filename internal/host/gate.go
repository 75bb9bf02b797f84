package host

import (
	"context"
	"net/http"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/reason"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/resilienthttp/resilient/internal/wire"
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

// Applicant is what the gate knows of the call whose attempts it admits.
// A call embeds it (the root's transport.go) and fills it once per call.
type Applicant struct {
	// hc is the Transport's configuration of its hosts.
	Cfg *Config
	// Ctx is the caller's: its deadline bounds the waits, its end ends
	// them.
	Ctx context.Context
	// Req is the caller's request: its route shares the host's retry
	// tokens (routeshare.go).
	Req *http.Request
	// Joined: the call waited for its key's call in flight (internal/loops, internal/loops/flight.go):
	// its first attempt is a first attempt of its own, not a retry.
	Joined bool
	Hop    bool // a redirect hop: not a new operation
	// Single: the call sends one attempt, an outer loop retrying
	// (the root's loops.go): the loop waits as it chooses, save for the server's
	// delay (outerWait). lax: its attempt is never refused (the root's loops.go).
	Single, Lax bool
	// Asked (Unix ns): the time the server named for the operation's next
	// try, 0 if none (internal/loops, asked.go). unlinked: an outer loop's call
	// that nothing ties to an earlier one (WithOuterRetries(true) without
	// marks): it may be a retry, and waits as one (outerWait).
	Asked    int64
	Unlinked bool
	// Cold: the retry waits out a 503's Retry-After on a host with too
	// few first attempts to tell whether it sheds (Firsts.ColdWait). It
	// is judged again when the wait ends (Reservation.Wait).
	Cold bool
}

// Reservation is one attempt's admission.
type Reservation struct {
	H        *State
	Retry    bool          // attempt n > 0 of the operation
	First    bool          // the first attempt of this RoundTrip call
	hop      bool          // a redirect hop: not a new operation
	Delay    time.Duration // the wait before sending, backoff and pause
	Token    bool          // a retry token was taken
	share    *routeShare   // the route's share the token was also taken from; nil if none
	budgetAt int64         // when the budget paid for the retry (Unix ns), if budgeted
	budgeted bool
	done     func(error) // the breaker's, nil if none or uncounted
	released bool
	// At is the time of the latest admission step: the reservation's, then
	// the time wait returned at, which is when the attempt starts. Read
	// again only after something may have blocked, so that an attempt
	// that waits for nothing reads the clock once before it is sent.
	At int64 // Unix ns, by the Transport's clock
}

// Health is what an attempt's outcome says about its host.
type Health uint8

const (
	HealthNeutral Health = iota // says nothing: a cancelled caller, a 409 in progress, a 429 with a delay
	HealthOK                    // the host answered as it should (2xx–4xx)
	HealthFailure               // the host is unhealthy: 5xx, timeout, reset, refused
)

// Reserve decides at now whether attempt n of g may be sent after
// at least backoff, without blocking. For a retry it checks that the wait
// and the host's usual latency fit before the deadline. It checks that the
// breaker is not open. Then it takes a retry token and the budget's share.
// A retry polling for the end of an operation in progress elsewhere
// (polling) takes no token. An error is the reason the retry is refused;
// nothing was taken.
func (h *State) Reserve(g *Applicant, i, n int, backoff time.Duration, polling bool, now int64) (Reservation, error) {
	var r Reservation
	err := h.reserve(&r, g, i, n, backoff, polling, now)
	return r, err
}

// reserve is Reserve, into r.
func (h *State) reserve(r *Reservation, g *Applicant, i, n int, backoff time.Duration, polling bool, now int64) error {
	// A call that waited for its key's call in flight (Applicant.Joined)
	// sends its first attempt as a first attempt: it retries nothing.
	r.Reset(h, now, n > 0 && (i > 0 || !g.Joined), i == 0, g.Hop)
	r.Delay = 0
	if r.First && r.Retry && g.Single && !g.Lax {
		var err error
		r.Delay, err = h.reserveOuterRetry(r, g, now)
		return err
	}
	if r.First {
		// A 429's pause holds first attempts too, when it fits; when it
		// does not, the attempt goes out as a bare client's would.
		switch {
		case !g.Single:
			if p := h.Pauses.pausedFor(now, false); p > 0 && g.fits(now, p) {
				r.Delay = p
			}
		case r.Retry || g.Lax || g.Unlinked:
			r.Delay = h.outerWait(g, now) // a loop's re-send: as the loop chose, and the server asked
		}
		// An outer retry loop's call (the key's attempt n > 0) is a retry:
		// it spends a token when there is one, so that the retries inside
		// it are held to the budget; it is never refused, as a bare
		// client's call would not be. (An outer loop's retry that the gate
		// governs, the root's loops.go, is admitted below as any retry.)
		if r.Retry && h.Tokens != nil && h.Tokens.TakeAtNanos(now) {
			r.took(nil)
		}
		return nil
	}
	if h.Pauses.pushedBack(now) {
		return reason.ErrPushback
	}
	if h.Pauses.Shedding(now) {
		return reason.ErrDelayTooLong
	}
	r.Delay = max(backoff, h.Pauses.pausedFor(now, true))
	if !g.fits(now, r.Delay+g.expectedLatency(h)) {
		return reason.ErrDelayTooLong
	}
	if h.Breaker != nil && h.Breaker.State() == gobreaker.StateOpen {
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
func (h *State) reserveOuterRetry(r *Reservation, g *Applicant, now int64) (time.Duration, error) {
	if h.Pauses.pushedBack(now) {
		return 0, reason.ErrPushback
	}
	wait := h.outerWait(g, now)
	if !g.fits(now, wait+g.expectedLatency(h)) {
		wait = 0 // the server's time and an answer do not fit: the attempt goes as the loop sends it
	}
	if !g.fits(now, g.expectedLatency(h)) {
		return 0, reason.ErrDelayTooLong
	}
	if h.Breaker != nil && h.Breaker.State() == gobreaker.StateOpen {
		return 0, reason.ErrCircuitOpen
	}
	return wait, r.spend(g, now)
}

// Reset makes r a new reservation at now to h. It is of a retry (attempt
// n > 0 of the operation) if retry. It is of the first attempt of this
// RoundTrip call if first, of a redirect hop if hop. reserve sets its
// delay. It sets
// the fields one by one (bench/README.md, "Why the hot path is written
// this way").
func (r *Reservation) Reset(h *State, now int64, retry, first, hop bool) {
	r.H, r.done, r.At = h, nil, now
	r.Retry, r.First, r.hop, r.Token, r.released = retry, first, hop, false, false
	r.budgetAt, r.budgeted, r.share = 0, false, nil
}

// spend takes what a retry (or a hedge) of g costs at now: a retry token,
// from the host's bucket and from the share of g's route (routeshare.go),
// and the budget's share. On error (reason.ErrTokensExhausted, reason.ErrBudgetExhausted)
// nothing is held.
func (r *Reservation) spend(g *Applicant, now int64) error {
	h := r.H
	if h.Tokens != nil {
		s, ok := h.shares.take(RouteOf(g.Req), h.Tokens.Capacity(now))
		if !ok {
			return reason.ErrTokensExhausted
		}
		if !h.Tokens.TakeAtNanos(now) {
			if s != nil {
				h.shares.give(s, TokenUnit)
			}
			return reason.ErrTokensExhausted
		}
		r.took(s)
	}
	if !r.withdraw(now) {
		r.Cancel()
		return reason.ErrBudgetExhausted
	}
	return nil
}

// took records that r took a retry token, from the share s of its route
// too unless s is nil.
func (r *Reservation) took(s *routeShare) {
	r.Token, r.share = true, s
}

// withdraw has the host's budget, if it has one, pay for r's retry at now,
// and reports whether it did.
func (r *Reservation) withdraw(now int64) bool {
	if r.H.Budget == nil {
		return true
	}
	if !r.H.Budget.WithdrawAt(clock.Wall(now)) {
		return false
	}
	r.budgetAt, r.budgeted = now, true
	return true
}

// Wait sleeps the reservation's delay, then passes the policies that act at
// send time: a pause that began meanwhile, the rate limiter, the breaker.
// On error the reservation is cancelled; the error is the reason (a
// sentinel, the context's error, or reason.ErrRequestCanceled).
//
// r.at is then when the attempt starts.
func (r *Reservation) Wait(g *Applicant) error {
	if r.Delay > 0 {
		if err := sleep(g.Ctx, g.Cancelled(), r.Delay); err != nil {
			r.Cancel()
			return err
		}
		r.At = g.Cfg.Clock.Nanos()
	} else if err := g.Gone(); err != nil {
		r.Cancel()
		return err
	}
	h := r.H
	if !r.First && h.Pauses.PushbackUntil.Load() != 0 {
		// The server pushed back while the retry waited its backoff.
		if now := g.Cfg.Clock.Nanos(); h.Pauses.pushedBack(now) {
			r.At = now
			r.Cancel()
			return reason.ErrPushback
		}
	}
	if g.Cold && !r.First {
		// The first attempts sent while a cold host's retry waited may
		// show that the host sheds: the retry is not sent (see observe).
		g.Cold = false
		if now := g.Cfg.Clock.Nanos(); h.FirstsShedding(now) {
			r.At = now
			r.Cancel()
			return reason.ErrDelayTooLong
		}
	}
	if r.First && h.Pauses.PauseUntil.Load() != 0 && !g.Single {
		waited, at, err := r.waitPause(g)
		if err != nil {
			r.Cancel()
			return err
		}
		r.Delay, r.At = r.Delay+waited, at
	}
	if h.Limiter != nil {
		if err := h.Limiter.Wait(g.Ctx); err != nil {
			r.Cancel()
			if ctxErr := g.Ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return reason.ErrRateLimited // the limiter refuses waits past the deadline
		}
		r.At = g.Cfg.Clock.Nanos()
	}
	if h.Breaker != nil {
		if err := r.allow(g, r.First && g.Cfg.RetriesOnly); err != nil {
			r.Cancel()
			return err
		}
	}
	if !r.Retry && !r.hop {
		r.Sizes()
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
func (r *Reservation) waitPause(g *Applicant) (time.Duration, int64, error) {
	h := r.H
	now := g.Cfg.Clock.Nanos()
	h.Pauses.clearPauses(now)
	if p := h.Pauses.pausedFor(now, false); p > 0 && g.fits(now, p) {
		if err := sleep(g.Ctx, g.Cancelled(), p); err != nil {
			return 0, now, err
		}
		return p, g.Cfg.Clock.Nanos(), nil
	}
	return 0, now, nil
}

// allow passes the host's breaker (the host has one): an open breaker
// refuses (reason.ErrCircuitOpen), unless uncounted, which sends the attempt
// uncounted (a retries-only breaker never holds back a first attempt).
func (r *Reservation) allow(g *Applicant, uncounted bool) error {
	h := r.H
	done, err := h.Breaker.Allow()
	h.dispatchTransitions(g.Cfg)
	switch {
	case err == nil:
		r.done = done
	case !uncounted:
		return reason.ErrCircuitOpen
	}
	return nil
}

// Sizes has a first attempt of an operation (not a redirect hop, not an
// outer retry loop's retry), starting at r.at, size the retry tokens and
// the budget.
func (r *Reservation) Sizes() {
	if r.H.Tokens != nil {
		r.H.Tokens.FirstAtNanos(r.At)
	}
	if r.H.Budget != nil {
		r.H.Budget.DepositAt(clock.Wall(r.At))
	}
}

// settled marks r released, and reports whether it was not yet: a
// reservation is released once.
func (r *Reservation) settled() bool {
	if r.released {
		return false
	}
	r.released = true
	return true
}

// Cancel releases a reservation whose attempt was not sent: what the retry
// took is given back, and the breaker does not count it.
func (r *Reservation) Cancel() {
	if !r.settled() {
		return
	}
	if r.Token {
		r.H.Tokens.Refund()
		if r.share != nil {
			r.H.shares.give(r.share, TokenUnit)
		}
	}
	if r.budgeted {
		r.H.Budget.RefundAt(clock.Wall(r.budgetAt))
	}
	if r.done != nil {
		r.done(errBreakerExcluded)
	}
}

// Release releases the reservation of an attempt of g that was sent, with
// what its outcome says of the host.
func (r *Reservation) Release(g *Applicant, hl Health) {
	if !r.settled() {
		return
	}
	h := r.H
	if hl == HealthOK && h.Tokens != nil {
		h.Tokens.Earn()
		if h.shares.owing.Load() != 0 {
			h.shares.earn(RouteOf(g.Req), h.Tokens.Params().Refill)
		}
	}
	if r.done != nil {
		switch hl {
		case HealthOK:
			r.done(nil)
		case HealthFailure:
			r.done(errBreakerFailure)
		default:
			r.done(errBreakerExcluded)
		}
		h.dispatchTransitions(g.Cfg)
	}
}

// (removed) reports whether the host's breaker holds back
// retries only (BreakerConfig.RetriesOnly).

// expectedLatency is how long an attempt to h usually takes, bounded by the
// attempt timeout.
func (g *Applicant) expectedLatency(h *State) time.Duration {
	d := time.Duration(h.Latency.Avg.Load())
	if at := g.Cfg.AttemptTimeout; at > 0 {
		d = min(d, at)
	}
	return d
}

// fits reports whether waiting d from now leaves time before the caller's
// deadline.
func (g *Applicant) fits(now int64, d time.Duration) bool {
	dl, ok := g.Ctx.Deadline()
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
		return reason.ErrRequestCanceled
	}
}

// Cancelled returns the caller's Request.Cancel, nil if none (or if g has
// no request: the gate's own tests admit without one). It is deprecated,
// but http.Transport honours it as it honours the context, so the
// Transport's waits do too: a caller that closed it is gone, and no retry
// is sent for it.
func (g *Applicant) Cancelled() <-chan struct{} {
	if g.Req == nil {
		return nil
	}
	return g.Req.Cancel //lint:ignore SA1019 a field net/http still honours
}

// Gone returns why the caller gave up, nil if it has not: its context's
// error, or errRequestCanceled once it closed Request.Cancel.
func (g *Applicant) Gone() error {
	if err := g.Ctx.Err(); err != nil {
		return err
	}
	if c := g.Cancelled(); c != nil {
		select {
		case <-c:
			return reason.ErrRequestCanceled
		default:
		}
	}
	return nil
}

// ReserveHedge admits a hedge to h at now, as reserve and wait admit a retry
// sent at once, except that it never waits. These refuse it: the server's
// pushback, a host paused by a Retry-After, an open breaker, an empty token
// bucket or budget, a rate limiter without a token at hand, or a deadline
// too close. The error says why, and nothing is held. The reservation is
// released like a retry's.
func (h *State) ReserveHedge(g *Applicant, now int64) (Reservation, error) {
	r := Reservation{H: h, Retry: true, At: now}
	switch {
	case h.Pauses.pushedBack(now):
		return r, reason.ErrPushback
	case h.Pauses.pausedFor(now, true) > 0, g.Asked > now, !g.fits(now, g.expectedLatency(h)):
		return r, reason.ErrDelayTooLong // a pause, or the delay a copy's answer named (internal/loops, asked.go)
	case h.Breaker != nil && h.Breaker.State() == gobreaker.StateOpen:
		return r, reason.ErrCircuitOpen
	}
	if err := r.spend(g, now); err != nil {
		return r, err
	}
	if h.Limiter != nil && !h.Limiter.AllowN(clock.Wall(now), 1) {
		r.Cancel()
		return r, reason.ErrDelayTooLong
	}
	if h.Breaker != nil {
		if err := r.allow(g, false); err != nil {
			r.Cancel()
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
func (h *State) outerWait(g *Applicant, now int64) time.Duration {
	p := h.Pauses.pausedFor(now, true)
	if g.Asked > now {
		p = max(p, time.Duration(g.Asked-now))
	}
	if p > 0 && g.fits(now, p) {
		return p
	}
	return 0
}

// Succeeded is what a plain success, attempt a of g admitted by res, does
// to its host h: it releases the reservation with a healthy answer, and
// the host hears its latency and, for a first attempt, its health. A
// plain call (the root's transport.go, the plain call) ends so too.
func (h *State) Succeeded(g *Applicant, a *wire.Attempt, res *Reservation) {
	res.Release(g, HealthOK)
	h.Latency.Observe(a.Took)
	if !res.Retry {
		h.NoteFirst(a.End, true)
	}
}
