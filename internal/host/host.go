// Package host is a Transport's state per destination host and its gate:
// the admission of each attempt (retry tokens and route shares, budget,
// breaker, rate limit, pauses, pushback), and what the host's answers
// showed (recent first attempts, latency, dedupe evidence). The root builds
// its Config from the options and asks it; it never imports the root.
package host

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// State is what a Transport keeps per destination host (URL.Host). It
// holds the policies of its gate: pause, rate limiter, breaker, retry
// tokens, budget. It holds what they need to know about the host, each part
// with its owner. It is created on a host's first request. It is evicted
// once the host has been idle for a window (see hosts).
type State struct {
	Name    string
	Tokens  *retryTokens // nil when retry tokens are off
	Budget  Budget       // nil when no budget is configured
	Breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
	Limiter *rate.Limiter // nil without a RateLimit

	// Pauses: what the server asked of the host's requests (Retry-After,
	// pushback).
	Pauses pauses
	// OpenUntil (Unix ns) is when an open breaker will let a probe through.
	OpenUntil atomic.Int64
	// lastUsed (Unix ns) is when a request last used the host: hosts idle
	// for a window are evicted.
	lastUsed atomic.Int64

	// Evidence: the routes whose server showed it dedupes by key.
	Evidence Evidence
	// shares: what each route took of the retry tokens and has not earned
	// back (routeshare.go).
	shares routeShares
	// transitions: the breaker's, recorded under gobreaker's lock,
	// dispatched later.
	transitions transitions
	// Latency: the host's attempt latencies (latency.go). Last: it has a
	// cache line of its own.
	Latency Latency
}

// cacheLine is the size of a CPU cache line on the common platforms.
const cacheLine = 64

// Config is how a Transport configures its hosts: each new host's
// retry control, and what its gate reads of the Transport.
type Config struct {
	Clock          *clock.Clock
	Tokens         *retrycontrol.TokensConfig // nil: retry tokens off
	Budget         func(host string) Budget   // nil: no budget
	Breaker        *BreakerConfig             // nil: no breaker
	Quantile       float64                    // the hedge delay's latency quantile, 0 if none
	RateLimit      rate.Limit
	RateBurst      int
	AttemptTimeout time.Duration
	// RetriesOnly: an open breaker refuses retries only
	// (CircuitBreaker.RetriesOnly).
	RetriesOnly bool
	// OnTransition hears the breakers' transitions, nil if nothing does.
	OnTransition func(host string, from, to gobreaker.State)
}

// Budget is a host's retry budget: the root's Budget.
type Budget interface {
	DepositAt(now time.Time)
	WithdrawAt(now time.Time) bool
	RefundAt(at time.Time)
}

// Table is a Transport's table of per-host state. A sweep removes entries
// idle for longer than idleAfter, with no breaker open and no pause
// pending. The sweep runs on the request path at most once per idleAfter.
// So memory follows the set of active hosts, without a background
// goroutine.
//
// last caches one entry of the table. A Transport that calls one host (the
// common case) then finds its state without hashing the name. last is
// replaced only when it has not been used for lastReplace. So requests to
// several hosts at once do not take turns rewriting it. It only ever holds
// an entry of the table (see remember and sweep).
type Table struct {
	Cfg       *Config
	M         sync.Map // URL.Host → *State
	Last      atomic.Pointer[State]
	IdleAfter int64 // ns
	NextSweep atomic.Int64
	sweeping  atomic.Bool
}

// lastUsedStep is the resolution of State.lastUsed. A request updates
// it only when it is older than that. So requests sharing a host do not all
// write its cache line. Idle hosts are evicted up to this early.
const lastUsedStep = int64(time.Millisecond)

// lastReplace is how long the cached host must have been unused before
// another host takes its place in hosts.last.
const lastReplace = int64(time.Second)

// Host returns the state of the named host, creating it if needed, and
// marks it used at now. The common case is the cached host with no sweep
// due: two loads and a comparison of names.
func (hs *Table) Host(name string, ns int64) *State {
	if h := hs.Last.Load(); h != nil && ns < hs.NextSweep.Load() && h.Name == name {
		h.used(ns)
		return h
	}
	return hs.find(name, ns)
}

// find is host past the cache, or with a sweep due: it sweeps first,
// so that a host found below is not then evicted as idle.
func (hs *Table) find(name string, ns int64) *State {
	hs.sweepIfDue(ns)
	h := hs.cached(name)
	if h == nil {
		if v, ok := hs.M.Load(name); ok {
			h = v.(*State)
		} else {
			v, _ := hs.M.LoadOrStore(name, hs.Cfg.newHost(name, ns))
			h = v.(*State)
		}
		hs.remember(h, ns)
	}
	h.used(ns)
	return h
}

// cached returns the named host's state if hosts.last holds it, else nil.
func (hs *Table) cached(name string) *State {
	if h := hs.Last.Load(); h != nil && h.Name == name {
		return h
	}
	return nil
}

// used marks h used at ns (Unix ns).
func (h *State) used(ns int64) {
	if ns-h.lastUsed.Load() >= lastUsedStep {
		h.lastUsed.Store(ns)
	}
}

// sweepIfDue sweeps the idle hosts if a sweep is due at ns (Unix ns).
func (hs *Table) sweepIfDue(ns int64) {
	if n := hs.NextSweep.Load(); ns >= n {
		hs.sweep(ns)
	}
}

// remember caches h, found in the table at ns, as the last host. It does
// not if the cached one was used within lastReplace. A sweep that evicts an
// entry removes it from the cache after removing it from the table.
// remember stores first and checks the table after. So whichever runs
// first, the cache never keeps an entry the table no longer has.
func (hs *Table) remember(h *State, ns int64) {
	if cur := hs.Last.Load(); cur != nil {
		if ns-cur.lastUsed.Load() < lastReplace {
			return // used lately
		}
	}
	hs.Last.Store(h)
	if v, ok := hs.M.Load(h.Name); !ok || v != h {
		hs.Last.CompareAndSwap(h, nil)
	}
}

// newHost returns the state of a host new to the table, used at ns.
func (hc *Config) newHost(name string, ns int64) *State {
	h := &State{Name: name}
	h.lastUsed.Store(ns) // used now: a sweep running meanwhile keeps it
	if hc.Tokens != nil {
		h.Tokens = NewRetryTokens(*hc.Tokens)
	}
	if hc.Budget != nil {
		h.Budget = hc.Budget(name)
	}
	if hc.Breaker != nil {
		h.Breaker = newBreaker(*hc.Breaker, h, hc.Clock.Now)
	}
	if hc.Quantile > 0 {
		h.Latency.Hist = newLatencies(hc.Quantile)
	}
	if hc.RateLimit != rate.Inf {
		h.Limiter = rate.NewLimiter(hc.RateLimit, hc.RateBurst)
	}
	return h
}

// sweep removes the hosts idle since before now−idleAfter, unless another
// goroutine is sweeping. A request that still holds an evicted host's state
// finishes with it; the next request to that host starts afresh.
func (hs *Table) sweep(now int64) {
	if !hs.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer hs.sweeping.Store(false)
	if now < hs.NextSweep.Load() {
		return // another goroutine swept meanwhile
	}
	hs.NextSweep.Store(now + hs.IdleAfter)
	hs.M.Range(func(k, v any) bool {
		h := v.(*State)
		if h.idle(now, hs.IdleAfter) && hs.M.CompareAndDelete(k, v) {
			hs.Last.CompareAndSwap(h, nil)
		}
		return true
	})
}

// idle reports whether h can be forgotten at now. It can when unused for
// idleAfter, with no pause pending and no breaker open. No request may be
// waiting in its rate limiter, which would otherwise start afresh, with a
// full burst, for the next.
func (h *State) idle(now, idleAfter int64) bool {
	return now-h.lastUsed.Load() > idleAfter &&
		h.Pauses.over(now) &&
		(h.Breaker == nil || h.Breaker.State() == gobreaker.StateClosed) &&
		(h.Limiter == nil || h.Limiter.TokensAt(time.Unix(0, now)) >= 0)
}

// NoteFirst notes a first attempt's answer to h at end, healthy if ok, in
// the window of the host's recent first attempts (firsts.go).
func (h *State) NoteFirst(end int64, ok bool) { h.Pauses.Firsts.note(end, ok) }

// FirstsShedding reports whether h's recent first attempts show that it
// sheds at now (firsts.go).
func (h *State) FirstsShedding(now int64) bool { return h.Pauses.Firsts.shedding(now) }
