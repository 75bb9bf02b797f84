package retrycontrol

import (
	"math"
	"sync/atomic"
	"time"
)

// TokensConfig configures Tokens, the default retry control of a
// Transport (one bucket per destination host). Every zero field means its
// default; NewTokens resolves the configuration once, as documented on
// each field.
type TokensConfig struct {
	// Refill is the number of tokens each healthy answer earns: a success,
	// or an answer that is the request's fault rather than the host's (a
	// 4xx). A retry costs one token, so Refill bounds the retries per
	// healthy answer. Default 0.5; a negative or NaN value is clamped to 0
	// (retries then spend only what the bucket holds and never earn it
	// back); +Inf refills the bucket at every healthy answer.
	Refill float64

	// CapRatio scales the bucket with the host's traffic: the bucket holds
	// at most CapRatio × the first attempts sent to the host in the last
	// Window, and never less than MinTokens. It bounds the retries a sudden
	// outage can trigger before the bucket is empty. Default 0.02 (about
	// 0.2 s of traffic with the default Window); negative or NaN is
	// clamped to 0.
	CapRatio float64

	// MinTokens is the least the bucket holds, whatever the traffic, so
	// that a client with little traffic can still retry. Default 3;
	// negative or NaN is clamped to 0.
	MinTokens float64

	// Window is the period over which first attempts are counted to size
	// the bucket, in 10 buckets. Default 10 s.
	Window time.Duration
}

// DefaultTokensConfig returns the defaults: Refill 0.5, CapRatio 0.02,
// MinTokens 3, Window 10 s. They were chosen with the storm benchmark
// (bench/cmd/storm) so that retries help when failures are rare, fade as
// they grow, and stop when everything fails (see the README).
func DefaultTokensConfig() TokensConfig {
	return TokensConfig{Refill: 0.5, CapRatio: 0.02, MinTokens: 3, Window: 10 * time.Second}
}

// Tokens is a token bucket for retries, on the model of the AWS SDKs'
// retry quota: a retry takes a token, and is not sent when none is left; a
// healthy answer earns Refill tokens back; the bucket starts full. Unlike a
// budget that grows with first attempts (Budget), it grows only with
// answers the host gets right, so retries fade as the failure rate p grows
// — to about Refill × (1 − p) retries per operation — and when every answer
// fails, only what the bucket holds is spent, then none. First attempts are
// never refused: they only size the bucket (CapRatio × the first attempts of
// the last Window, at least MinTokens).
//
// The zero value is a usable Tokens that behaves as
// NewTokens(DefaultTokensConfig()). A Tokens must not be
// copied after first use. It is safe for concurrent use by multiple
// goroutines.
//
// Call First when an operation's first attempt is sent, Take before each
// retry (and do not retry if it returns false), Earn after each healthy
// answer, and Refund when a retry that took a token was then not sent. A
// Transport does all four for each destination host. The …At forms
// take the time explicitly, for tests and simulations.
//
// First is one atomic add (as Budget.Deposit); Earn is one atomic load while
// the bucket is full and a compare-and-swap otherwise; Take sums the
// window's 10 buckets and makes a compare-and-swap. None allocates.
type Tokens struct {
	p      tokensParams // zero: the defaults
	firsts Budget       // counts first attempts in the window (deposits only)
	// deficit is the number of tokens missing from a full bucket, in
	// millitokens, ≥ 0. Counting what is missing rather than what is there
	// makes the zero value a full bucket whatever its capacity.
	deficit atomic.Int64
}

// TokenUnit is one token in the fixed-point unit of Tokens.deficit.
const TokenUnit = 1000

type tokensParams struct {
	refill   int64 // millitokens per healthy answer
	capRatio float64
	minCap   int64 // millitokens
	set      bool
}

// NewTokens returns a full bucket configured by c, with its fields'
// zero and out-of-range values resolved as documented on TokensConfig.
func NewTokens(c TokensConfig) *Tokens {
	rt := new(Tokens)
	rt.Init(c)
	return rt
}

// Init configures a Tokens that has not been used yet, in place (for a
// Tokens held by value in a larger struct).
func (rt *Tokens) Init(c TokensConfig) {
	rt.p = c.params()
	rt.firsts.p = BudgetConfig{Window: c.window()}.params()
}

// Span returns the window over which first attempts are counted, resolved.
func (c TokensConfig) Span() time.Duration { return c.window() }

func (c TokensConfig) window() time.Duration {
	if c.Window <= 0 {
		return DefaultTokensConfig().Window
	}
	return c.Window
}

func (c TokensConfig) params() tokensParams {
	d := DefaultTokensConfig()
	pick := func(v, def float64) float64 {
		switch {
		case v == 0:
			return def
		case !(v > 0): // negative or NaN
			return 0
		}
		return v
	}
	refill := pick(c.Refill, d.Refill)
	minCap := pick(c.MinTokens, d.MinTokens)
	return tokensParams{
		refill:   toMilli(refill),
		capRatio: pick(c.CapRatio, d.CapRatio),
		minCap:   toMilli(minCap),
		set:      true,
	}
}

// toMilli converts tokens to millitokens, saturating far below overflow.
func toMilli(v float64) int64 {
	const limit = math.MaxInt64 / 4
	if m := v * TokenUnit; m < limit {
		return int64(math.Round(m))
	}
	return limit
}

func (rt *Tokens) params() tokensParams {
	if !rt.p.set {
		return DefaultTokensConfig().params()
	}
	return rt.p
}

// First records a first attempt now.
func (rt *Tokens) First() { rt.FirstAt(time.Now()) }

// FirstAt records a first attempt at time now. It sizes the bucket; it
// never spends or earns a token.
func (rt *Tokens) FirstAt(now time.Time) { rt.firsts.deposit(UnixNanos(now)) }

// FirstAtNanos is FirstAt at now in Unix nanoseconds.
func (rt *Tokens) FirstAtNanos(now int64) { rt.firsts.deposit(now) }

// Firsts returns the first attempts recorded in the window at now.
func (rt *Tokens) Firsts(now time.Time) int64 { return rt.firstsAt(UnixNanos(now)) }

// Deficit returns the millitokens missing from a full bucket.
func (rt *Tokens) Deficit() int64 { return rt.deficit.Load() }

// firstsAt returns the first attempts recorded in the window at now.
func (rt *Tokens) firstsAt(now int64) int64 {
	firsts, _, _, _ := rt.firsts.sum(rt.firsts.params().epochOf(now), nil)
	return firsts
}

// Take reports whether a retry may be sent now, and if so takes its token.
func (rt *Tokens) Take() bool { return rt.TakeAt(time.Now()) }

// TakeAt reports whether a retry may be sent at time now, and if so takes
// its token. A refused retry takes nothing.
func (rt *Tokens) TakeAt(now time.Time) bool { return rt.TakeAtNanos(UnixNanos(now)) }

// TakeAtNanos is TakeAt at now in Unix nanoseconds.
func (rt *Tokens) TakeAtNanos(now int64) bool {
	capacity := rt.CapacityNanos(now)
	for {
		d := rt.deficit.Load()
		if d+TokenUnit > capacity {
			return false
		}
		if rt.deficit.CompareAndSwap(d, d+TokenUnit) {
			return true
		}
	}
}

// Refund gives back the token of a retry that was taken and then not sent.
func (rt *Tokens) Refund() { rt.give(TokenUnit) }

// RefillMilli returns the millitokens a healthy answer earns.
func (rt *Tokens) RefillMilli() int64 { return rt.params().refill }

// Earn records a healthy answer: it puts Refill tokens back, up to a full
// bucket.
//
// A full bucket, the common case, is one atomic load (inlined).
func (rt *Tokens) Earn() {
	if rt.deficit.Load() != 0 {
		rt.earn()
	}
}

// earn is Earn when tokens are missing. It is not inlined, so that Earn
// is.
//
//go:noinline
func (rt *Tokens) earn() { rt.give(rt.params().refill) }

func (rt *Tokens) give(n int64) {
	for {
		d := rt.deficit.Load()
		if d == 0 {
			return
		}
		if rt.deficit.CompareAndSwap(d, max(d-n, 0)) {
			return
		}
	}
}

// Available returns the number of retries Take would allow now if nothing
// else happened, rounded down. It is meant for reports and metrics.
func (rt *Tokens) Available() float64 { return rt.AvailableAt(time.Now()) }

// AvailableAt returns the number of retries TakeAt(now) would allow if
// nothing else happened, rounded down. It does not modify rt.
func (rt *Tokens) AvailableAt(now time.Time) float64 {
	return float64(max(rt.Capacity(now)-rt.deficit.Load(), 0) / TokenUnit)
}

// Capacity is the bucket's size at now, in millitokens (TokenUnit per
// token).
func (rt *Tokens) Capacity(now time.Time) int64 { return rt.CapacityNanos(UnixNanos(now)) }

// CapacityNanos is Capacity at now in Unix nanoseconds.
func (rt *Tokens) CapacityNanos(now int64) int64 {
	p := rt.params()
	return max(p.minCap, toMilli(p.capRatio*float64(rt.firstsAt(now))))
}
