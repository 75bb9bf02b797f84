package redisbudget

import (
	"math"
	"strconv"
	"time"

	"github.com/resilienthttp/resilient/internal/retrycontrol"
)

// Defaults of the fields of Config that are not the budget's rule (the rule's
// defaults are resilient.RetryBudget's: 0.2, 10, 10 s).
const (
	// DefaultFlushEvery is Config.FlushEvery's default: a process flushes a
	// budget once it has sent 128 first attempts to the host, so that
	// flushes by count cost 0.78 round trips per 100 first attempts, which
	// leaves room below one per 100 for the few other flushes (a new
	// budget's first, a quiet process's early one, a flush by interval when
	// the rate dips) while the window hears of first attempts within 0.64 s
	// at 200 per second.
	DefaultFlushEvery = 128
	// DefaultFlushInterval is Config.FlushInterval's default (capped at a
	// tenth of the Window, one bucket of the rolling window).
	DefaultFlushInterval = time.Second
	// DefaultCallTimeout is Config.CallTimeout's default: a Redis on the
	// same network answers a script in about a millisecond; 50 ms is far
	// beyond a healthy answer and short beside a flush interval.
	DefaultCallTimeout = 50 * time.Millisecond
	// DefaultPrefix is Config.Prefix's default.
	DefaultPrefix = "resilient:budget:"
)

// Config configures a Fleet. New resolves it once; the zero value of each
// field is documented with the field, and the zero Config is the common
// one: the default rule of resilient.RetryBudget shared by every process
// that uses the same Redis and Prefix.
type Config struct {
	// Ratio, MinPerSecond and Window are the budget's rule, with the
	// meaning, defaults and zero values of resilient.RetryBudget's fields
	// (0.2, 10 and 10 s): over the last Window, the fleet's retries to a
	// host stay below Ratio × the fleet's first attempts to it +
	// MinPerSecond × Window seconds. Every process sharing a budget must use
	// the same rule; the shared window is split into 10 buckets of Window/10
	// (rounded down to a whole microsecond) on the Redis server's clock.
	Ratio        float64
	MinPerSecond float64
	Window       time.Duration

	// FlushEvery is the number of first attempts to one host after which a
	// process flushes that host's budget (with every other budget that has
	// something to report, in the same round trip) before FlushInterval has
	// passed. 0 or less means DefaultFlushEvery (128).
	FlushEvery int

	// FlushInterval is the longest a process keeps first attempts or
	// retry permits of an active budget without flushing it. Each flush also
	// renews the process's lease of retry permits, so it bounds how stale a
	// lease is. 0 or less means DefaultFlushInterval (1 s), capped at
	// Window/10; any value is capped at Window/2, so that a lease is renewed
	// while the bucket charged for it is still in the window.
	FlushInterval time.Duration

	// CallTimeout bounds each call to Redis (one pipeline of flushes): a
	// call that has not answered within it counts as failed, whether or not
	// the go-redis client honours context deadlines, and the budgets it
	// carried fall back to their local budget. 0 or less means
	// DefaultCallTimeout (50 ms).
	CallTimeout time.Duration

	// Prefix starts the name of every Redis key of the Fleet. Fleets that
	// share a Redis and a Prefix share their budgets. "" means
	// DefaultPrefix ("resilient:budget:").
	Prefix string

	// OnStateChange, if not nil, is called when a budget switches between
	// StateShared and StateLocal, with the error that made it fall back
	// (nil when it resumes). It is called from the Fleet's background
	// goroutine, one call at a time and never under a lock; a slow callback
	// delays the next flush, and must not call Close.
	OnStateChange func(name string, from, to State, err error)
}

// State is the state of one budget of a Fleet.
type State int

const (
	// StateShared: retries are served from the lease the shared window
	// granted this process.
	StateShared State = iota
	// StateLocal: the last flush failed or timed out, and retries are
	// admitted by the process's own in-memory budget, with the same rule,
	// until a flush succeeds again.
	StateLocal
)

// String returns "shared" or "local".
func (s State) String() string {
	switch s {
	case StateShared:
		return "shared"
	case StateLocal:
		return "local"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Rule is a budget's rule resolved for a Backend: a retry is allowed while
// the retries of the window are below Ratio × its first attempts + Reserve.
type Rule struct {
	// Ratio is the number of retries allowed per first attempt, ≥ 0 and
	// finite.
	Ratio float64
	// Reserve is MinPerSecond × the window in seconds, ≥ 0.
	Reserve float64
	// Bucket is the width of one of the window's 10 buckets, a whole
	// number of microseconds ≥ 1 µs.
	Bucket time.Duration
	// ProcessTTL is how long a process that asked for retries counts as
	// active (sharing the permits) after its last flush.
	ProcessTTL time.Duration
}

// settings is a Config resolved by New.
type settings struct {
	rule      Rule
	local     retrycontrol.BudgetConfig // the local budget's configuration
	unlimited bool                      // Ratio is +Inf: every retry is allowed, nothing is shared
	every     int64
	interval  time.Duration
	timeout   time.Duration
	prefix    string
	onChange  func(name string, from, to State, err error)
}

func (c Config) resolve() settings {
	d := retrycontrol.DefaultBudgetConfig()
	window := c.Window
	if window <= 0 {
		window = d.Window
	}
	bucket := max(window/10/time.Microsecond*time.Microsecond, time.Microsecond)
	ratio, perSecond := retrycontrol.OrDefault(c.Ratio, d.Ratio), retrycontrol.OrDefault(c.MinPerSecond, d.MinPerSecond)
	s := settings{
		local:    retrycontrol.BudgetConfig{Ratio: c.Ratio, MinPerSecond: c.MinPerSecond, Window: c.Window},
		every:    int64(c.FlushEvery),
		interval: c.FlushInterval,
		timeout:  c.CallTimeout,
		prefix:   c.Prefix,
		onChange: c.OnStateChange,
	}
	s.unlimited = math.IsInf(ratio, 1) || math.IsInf(perSecond, 1)
	if s.every <= 0 {
		s.every = DefaultFlushEvery
	}
	if s.interval <= 0 {
		s.interval = min(DefaultFlushInterval, max(bucket, time.Millisecond))
	}
	// A lease is charged to the bucket it was granted in: it must be
	// renewed before that bucket leaves the window.
	s.interval = min(s.interval, max(5*bucket, time.Millisecond))
	if s.timeout <= 0 {
		s.timeout = DefaultCallTimeout
	}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	s.rule = Rule{
		Ratio:      ratio,
		Reserve:    perSecond * (10 * bucket).Seconds(),
		Bucket:     bucket,
		ProcessTTL: 3*s.interval + s.timeout,
	}
	return s
}
