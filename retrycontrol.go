package resilient

import (
	"time"

	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// RetryControl is a policy that decides, per destination host, whether a
// retry may be sent at all and how attempts are paced: RetryTokens (the
// default), RetryBudget, SharedBudget, CircuitBreaker and RateLimit. Give
// them to WithRetryControl. Each is a plain value whose zero fields mean
// the documented defaults.
type RetryControl interface {
	// retryControl seals the interface: only the types of this package
	// are retry controls.
	retryControl()
}

func (RetryTokens) retryControl()    {}
func (RetryBudget) retryControl()    {}
func (SharedBudget) retryControl()   {}
func (CircuitBreaker) retryControl() {}
func (RateLimit) retryControl()      {}

// WithRetryControl sets the retry controls of the Transport, replacing the
// default (RetryTokens{}) and any earlier WithRetryControl. Each control is
// kept per destination host; each refusal has its own error
// (ErrTokensExhausted, ErrBudgetExhausted, ErrCircuitOpen, ErrRateLimited),
// and a refused retry returns the last answer, as a bare client would have.
// The tokens and a budget never hold back a first attempt; a CircuitBreaker
// (unless RetriesOnly) and a RateLimit may.
//
//	WithRetryControl()                                    // none: only WithMaxAttempts limits retries
//	WithRetryControl(RetryBudget{Ratio: 0.1})             // a budget instead of the tokens
//	WithRetryControl(RetryTokens{}, CircuitBreaker{})     // the default tokens and a breaker
//	WithRetryControl(RetryTokens{}, RetryBudget{})        // both: a retry needs a token and the budget's leave
//	WithRetryControl(SharedBudget(fleet.For))             // a budget shared by a fleet (redisbudget)
//	WithRetryControl(RetryTokens{}, RateLimit{Rate: 100, Burst: 10})
//
// With no argument the Transport has no retry control: retries are limited
// only by WithMaxAttempts, the deadline and the server's directions. A
// Transport holds at most one control of each kind, and at most one budget
// (RetryBudget or SharedBudget): when the arguments name two, the later
// wins. A nil SharedBudget adds no budget: WithRetryControl(SharedBudget(nil))
// has no control at all, as WithRetryControl() has none.
func WithRetryControl(controls ...RetryControl) Option {
	return func(c *config) {
		c.tokensOff, c.tokens = true, RetryTokens{}
		c.budgetConfig, c.budgetFunc, c.breaker = nil, nil, nil
		c.rateLimit, c.rateBurst = rate.Inf, 0
		for _, rc := range controls {
			switch rc := rc.(type) {
			case RetryTokens:
				c.tokensOff, c.tokens = false, rc
			case RetryBudget:
				c.budgetConfig, c.budgetFunc = &rc, nil
			case SharedBudget:
				if rc != nil {
					c.budgetConfig, c.budgetFunc = nil, rc
				}
			case CircuitBreaker:
				r := rc.resolved() // a copy per Transport: an Option may build many
				c.breaker = &r
			case RateLimit:
				c.rateLimit, c.rateBurst = rc.resolved()
			}
		}
	}
}

// RetryTokens is a retry control (see WithRetryControl), and the default
// one. Each destination host gets a token bucket for retries, on the model
// of the AWS SDKs' retry quota. The bucket starts full. A retry takes a
// token and is not sent when none is left. The last answer is returned
// (Report.Stopped is ErrTokensExhausted), or an *Error with that Reason. A
// healthy answer earns Refill tokens back. So retries fade as the failure
// rate p grows, to about Refill × (1 − p) retries per operation. When every
// answer fails, only what the bucket holds is spent, then none. First
// attempts are never refused. They only size the bucket: CapRatio × the
// first attempts of the last Window, at least MinTokens.
//
// The zero value is the default control: every zero field means its
// default (Refill 0.5, CapRatio 0.02, MinTokens 3, Window 10 s). The storm
// benchmark (bench/cmd/storm) chose the defaults. With them, retries help
// when failures are rare, fade as they grow, and stop when everything fails
// (see the README). Most callers should keep it, the default.
type RetryTokens struct {
	// Refill is the number of tokens each healthy answer earns: a success,
	// or an answer that is the request's fault rather than the host's (a
	// 4xx). A retry costs one token, so Refill bounds the retries per
	// healthy answer. 0 means the default, 0.5; a negative or NaN value
	// means none (retries then spend only what the bucket holds and never
	// earn it back); +Inf refills the bucket at every healthy answer.
	Refill float64

	// CapRatio scales the bucket with the host's traffic: the bucket holds
	// at most CapRatio × the first attempts sent to the host in the last
	// Window, and never less than MinTokens. It bounds the retries a sudden
	// outage can trigger before the bucket is empty. 0 means the default,
	// 0.02 (about 0.2 s of traffic with the default Window); negative or
	// NaN means none (the bucket holds MinTokens).
	CapRatio float64

	// MinTokens is the least the bucket holds, whatever the traffic, so
	// that a client with little traffic can still retry. 0 means the
	// default, 3; negative or NaN means none.
	MinTokens float64

	// Window is the period over which first attempts are counted to size
	// the bucket, in 10 buckets. 0 or negative means the default, 10 s.
	Window time.Duration
}

// RetryBudget is a retry control (see WithRetryControl). Each destination
// host gets a Finagle-style retry budget. It limits retries to a fraction of
// the traffic, so retries cannot turn a partial outage into a total one. It
// counts first attempts and retries over the last Window, and allows a retry
// while
//
//	retries < Ratio × first attempts + MinPerSecond × Window seconds
//
// Say 1,000 operations fail within one window, and each would retry 3 times.
// The default budget lets through at most 0.2 × 1,000 + 10 × 10 = 300
// retries, not 3,000. A retry the budget refuses is not sent. The last
// answer is returned (Report.Stopped is ErrBudgetExhausted), or an *Error
// with that Reason. A budget grows with first attempts whatever their fate.
// So retries add up to Ratio to the load even when every request fails.
//
// The zero value is the budget of Finagle and Linkerd: every zero field
// means its default (Ratio 0.2, MinPerSecond 10, Window 10 s). The window is
// split into 10 buckets, so an event counts for between 9/10 and all of
// Window. Memory is constant whatever the traffic. Most callers should use
// RetryTokens, the default, which grows with healthy answers instead.
type RetryBudget struct {
	// Ratio is the number of retries allowed per first attempt in the
	// window: 0.2 lets retries add at most 20 % to the traffic. 0 or NaN
	// means the default, 0.2; a negative value means none (only the
	// MinPerSecond floor); +Inf removes the limit.
	Ratio float64

	// MinPerSecond is the number of retries per second always allowed, on
	// top of Ratio. A client with little traffic can then still retry:
	// MinPerSecond × Window seconds retries per window. 0 or NaN means the
	// default, 10; a negative value means none.
	MinPerSecond float64

	// Window is the length of the rolling window over which first attempts
	// and retries are counted. It is split into 10 buckets of Window/10
	// each, rounded down to a whole nanosecond, at least 1 ns. 0 or
	// negative means the default, 10 s.
	Window time.Duration
}

// Budget is a retry budget kept outside the Transport, such as one shared
// by a fleet of processes (see SharedBudget). The Transport calls:
//
//   - DepositAt when an operation's first attempt is sent to the host;
//   - WithdrawAt before each retry. If it returns false, the retry is not
//     sent: the request stops with ErrBudgetExhausted as its reason;
//   - RefundAt(at) when a retry whose WithdrawAt(at) returned true was
//     then not sent.
//
// The Transport calls the methods on its request path, with the caller's
// goroutine, and does not wait for anything else. An implementation must be
// safe for concurrent use. It must not block on I/O: a remote budget
// answers from local state and synchronises in the background. It should
// not allocate.
type Budget interface {
	DepositAt(now time.Time)
	WithdrawAt(now time.Time) bool
	RefundAt(at time.Time)
}

// SharedBudget is a retry control (see WithRetryControl) for a budget kept
// outside the Transport. The function returns the Budget of each
// destination host. A fleet of processes may share one through Redis
// (github.com/resilienthttp/resilient/redisbudget). Its Memory backend
// shares one between the Transports of a process. The Transport calls the
// function when it creates a host's state, with the host as in URL.Host.
// That is on the host's first request, and again after the state was
// evicted for being idle. A nil result means no budget for that host. The
// function must be safe for concurrent use. A nil SharedBudget is ignored.
type SharedBudget func(host string) Budget

func newBudget(c RetryBudget) *retrycontrol.Budget {
	return retrycontrol.NewBudget(retrycontrol.BudgetConfig(c))
}

// span is the window c's budget counts over.
func (c RetryBudget) span() time.Duration { return retrycontrol.BudgetConfig(c).Span() }

// BreakerState is the state of a host's circuit breaker.
type BreakerState uint8

// Breaker states.
const (
	BreakerClosed BreakerState = iota
	BreakerHalfOpen
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

// CircuitBreaker is a retry control (see WithRetryControl): a classic
// circuit breaker per destination host, built on
// github.com/sony/gobreaker/v2's TwoStepCircuitBreaker. A Transport has none
// by default. The zero value is the default breaker: every zero field means
// its documented default. It trips at a failure ratio of 0.5 over at least
// 20 requests in a 10 s window. It stays open 5 s, then lets 1 probe
// through.
//
// Failures are 5xx other than 501 and 505, timeouts, resets, refused
// connections, and a 429 without Retry-After. Successes and 4xx answers
// count as successes. Neither counts: a 409 "in progress" (the operation is
// busy, not the host), a 429 with Retry-After (the host pause handles it), a
// local refusal, a cancelled caller. While open, a request fails at once
// with ErrCircuitOpen, unsent. After OpenTimeout it lets HalfOpenProbes
// requests through; that many successes close it, one failure opens it.
//
// A classic breaker sheds load from an overloaded dependency. But while
// open it also fails requests that a single attempt might have got
// through. RetriesOnly sheds retries and never refuses a first attempt.
type CircuitBreaker struct {
	// FailureRatio trips the breaker when failures ÷ requests in the window
	// reach it (default 0.5; a value ≤ 0 or > 1 means the default).
	FailureRatio float64
	// MinRequests is the number of requests in the window below which the
	// breaker never trips (default 20).
	MinRequests uint32
	// Window is the rolling period over which requests are counted while
	// closed, in 10 buckets (default 10 s).
	Window time.Duration
	// OpenTimeout is how long the breaker stays open before letting probes
	// through (default 5 s).
	OpenTimeout time.Duration
	// HalfOpenProbes is how many requests may be in flight while half-open,
	// and how many successes close the breaker (default 1).
	HalfOpenProbes uint32
	// RetriesOnly makes an open breaker refuse retries only. First attempts
	// are always sent, and counted while the breaker admits them. The
	// breaker can then no longer shed the host's first-attempt load. But it
	// never makes a request fail that a single attempt would have got
	// through. Brooker describes the trade-off in "Fixing retries with
	// token buckets and circuit breakers" (2022). Default false: an open
	// breaker refuses every request, without sending it.
	RetriesOnly bool
}

// defaultBreaker is what CircuitBreaker's zero fields mean.
var defaultBreaker = CircuitBreaker{FailureRatio: 0.5, MinRequests: 20, Window: 10 * time.Second, OpenTimeout: 5 * time.Second, HalfOpenProbes: 1}

// resolved returns s with its zero fields set to their defaults.
func (s CircuitBreaker) resolved() CircuitBreaker {
	d := defaultBreaker
	if s.FailureRatio <= 0 || s.FailureRatio > 1 {
		s.FailureRatio = d.FailureRatio
	}
	if s.MinRequests == 0 {
		s.MinRequests = d.MinRequests
	}
	if s.Window <= 0 {
		s.Window = d.Window
	}
	if s.OpenTimeout <= 0 {
		s.OpenTimeout = d.OpenTimeout
	}
	if s.HalfOpenProbes == 0 {
		s.HalfOpenProbes = d.HalfOpenProbes
	}
	return s
}

func fromGobreaker(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// RateLimit is a retry control (see WithRetryControl) that paces the
// requests to each destination host. It uses a token bucket of Rate
// requests per second and the given Burst (golang.org/x/time/rate). Every
// attempt, first or retry, waits for a token, honouring the request's
// context. An attempt whose wait would end after the context's deadline is
// not sent. The request then stops with ErrRateLimited as its reason. The
// last answer is returned when there is one. A Transport has no rate limit
// by default.
//
// Zero values: a Rate of 0 (or negative, or rate.Inf) limits nothing, so
// RateLimit{} is no limit; a Burst of 0 (or negative) means 1.
type RateLimit struct {
	// Rate is the sustained number of requests per second to each host.
	Rate rate.Limit
	// Burst is the number of requests that may go out at once after a
	// quiet period.
	Burst int
}

// resolved returns the limiter's parameters: rate.Inf when l limits
// nothing.
func (l RateLimit) resolved() (rate.Limit, int) {
	if !(l.Rate > 0) {
		return rate.Inf, 0
	}
	return l.Rate, max(l.Burst, 1)
}
