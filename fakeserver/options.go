package fakeserver

import (
	"fmt"
	"time"

	"github.com/resilienthttp/resilient/pushback"
)

// Option configures a Server in New or NewUnstarted. Options apply in order and
// the last one wins; most set one field of the Scenario, whose documentation
// gives the default.
type Option func(*options)

type options struct {
	sc       Scenario
	now      func() time.Time
	pushback *pushback.Config // nil: no middleware
}

// WithScenario sets the whole scenario (a copy of sc), replacing what earlier
// options set. Default: the zero Scenario, a healthy server.
func WithScenario(sc Scenario) Option {
	return func(o *options) { o.sc = sc.clone() }
}

// WithSeed sets Scenario.Seed, the seed of the random draws. Default 0.
func WithSeed(seed uint64) Option {
	return func(o *options) { o.sc.Seed = seed }
}

// WithMode sets Scenario.Mode: ModeIETF (default) stores only successes and
// final client errors; ModeStripe stores whatever was answered once execution
// started.
func WithMode(m Mode) Option {
	return func(o *options) { o.sc.Mode = m }
}

// WithMismatchStatus sets the status of a key reused with a different payload:
// 422 (default) or 409.
func WithMismatchStatus(code int) Option {
	return func(o *options) { o.sc.MismatchStatus = code }
}

// WithTTL sets how long idempotency records live. Default 24h.
func WithTTL(d time.Duration) Option {
	return func(o *options) { o.sc.TTL = Duration(d) }
}

// WithMaxRecords bounds the number of idempotency records. Default 1,000,000.
func WithMaxRecords(n int) Option {
	return func(o *options) { o.sc.MaxRecords = n }
}

// WithRequireKey makes Idempotency-Key mandatory (400 without it) on every
// POST when required is true. Default false.
func WithRequireKey(required bool) Option {
	return func(o *options) { o.sc.RequireKey = required }
}

// WithInProgressRetryAfter sets the Retry-After of the 409 answered while a key
// is in progress. Default 1s.
func WithInProgressRetryAfter(d time.Duration) Option {
	return func(o *options) { o.sc.InProgressRetryAfter = Duration(d) }
}

// WithOutage adds an outage window. Default none.
func WithOutage(out Outage) Option {
	return func(o *options) { o.sc.Outages = append(o.sc.Outages, out) }
}

// WithCapacity sets the capacity model. Default: unlimited.
func WithCapacity(c Capacity) Option {
	return func(o *options) { o.sc.Capacity = &c }
}

// WithRoute adds a route after those already set; routes match in order.
// Default none.
func WithRoute(r Route) Option {
	return func(o *options) { o.sc.Routes = append(o.sc.Routes, r.clone()) }
}

// WithClock sets the clock used for record expiry, outage windows, object
// timestamps and the per-second series; sleeps and timeouts still use real
// time. Default time.Now. Tests use it to expire records without waiting.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// errorf returns an error whose message is prefixed with "fakeserver: ".
func errorf(format string, args ...any) error {
	return fmt.Errorf("fakeserver: "+format, args...)
}
