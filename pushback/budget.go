package pushback

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is a server-side retry budget: it counts, over a rolling window,
// the retries it admitted, the healthy answers (status below 500, other than
// 429), and the failure answers it let out without pushback, and admits a
// retry while
//
//	retries < Ratio × healthy + MinPerSecond × Window.
//
// The budget is exhausted when the retries of the window, or its failure
// answers sent without pushback (each an invitation to retry), reach that
// allowance, or when MaxInFlight is set and RetryInFlightShare of it is in
// service. While it is, retries are refused with a pushback answer before
// the handler runs, and the handler's failure answers carry the pushback
// headers.
//
// Create one with New and mount it with Middleware; one Budget may guard
// several handlers, which then share it. The zero Budget is not usable.
// Counting takes no lock and allocates nothing per request; a Budget is
// safe for concurrent use by multiple goroutines.
type Budget struct {
	s     settings
	start time.Time // the window's periods and the key table's times count from it
	ans   *answers
	keys  *recentKeys // nil: no detection by key

	retries counter // admitted retries
	healthy counter // answers below 500, other than 429
	invited counter // failure answers sent without pushback, and dropped answers

	inFlight atomic.Int64
	totals   [numTotals]atomic.Uint64

	pool sync.Pool // of *recorder
}

// Indexes of Budget.totals, as in Stats.
const (
	totFirst = iota
	totRetries
	totRetriesShed
	totFirstShed
	totHealthy
	totFailures
	totHinted
	numTotals
)

// New returns a Budget configured by c (see Config for the defaults). It
// panics if c is invalid: a Status other than 0, 429 and 503, or a negative
// Window, Buckets, MaxInFlight, KeySlots, RetryAfter or RetryInFlightShare,
// or a NaN or infinite Ratio or MinPerSecond.
//
// The window starts at time.Now(): create a Budget in the synctest bubble,
// if any, that serves its requests.
func New(c Config) *Budget {
	s := c.resolve()
	b := &Budget{
		s:       s,
		start:   time.Now(),
		ans:     newAnswers(s),
		retries: newCounter(s.buckets),
		healthy: newCounter(s.buckets),
		invited: newCounter(s.buckets),
	}
	if s.keyWindowMs > 0 {
		b.keys = newRecentKeys(s.keySlots, s.keyWindowMs, s.seed)
	}
	b.pool.New = func() any { return new(recorder) }
	return b
}

// Stats is a snapshot of a Budget's counters. The totals count since New;
// the Window fields describe the rolling window at the time of the
// snapshot.
type Stats struct {
	// FirstAttempts counts the first attempts that arrived, shed or not.
	FirstAttempts uint64
	// Retries counts the retries that arrived, admitted or not.
	Retries uint64
	// RetriesShed counts the retries refused with a pushback answer, over
	// the budget or for MaxInFlight.
	RetriesShed uint64
	// FirstAttemptsShed counts the first attempts refused with a pushback
	// answer for MaxInFlight.
	FirstAttemptsShed uint64
	// Healthy counts the handler's answers with a status below 500, other
	// than 429.
	Healthy uint64
	// Failures counts the handler's other answers, and the requests it
	// dropped without an answer (a panic, such as http.ErrAbortHandler).
	Failures uint64
	// Hinted counts the failure answers that carried the pushback headers
	// because the budget was exhausted.
	Hinted uint64
	// InFlight is the number of requests in the middleware now.
	InFlight int64
	// WindowRetries is the number of retries admitted in the window.
	WindowRetries uint64
	// WindowHealthy is the number of healthy answers in the window.
	WindowHealthy uint64
	// WindowInvited is the number of failure answers sent without pushback
	// (and dropped answers) in the window.
	WindowInvited uint64
	// Allowance is Ratio × WindowHealthy + MinPerSecond × Window: the
	// budget is exhausted when WindowRetries or WindowInvited reaches it.
	Allowance float64
}

// RetriesAdmitted returns the retries that got to the handler.
func (s Stats) RetriesAdmitted() uint64 { return s.Retries - s.RetriesShed }

// Stats returns a snapshot of b's counters.
func (b *Budget) Stats() Stats {
	serial := b.serial(b.now())
	st := Stats{
		FirstAttempts:     b.totals[totFirst].Load(),
		Retries:           b.totals[totRetries].Load(),
		RetriesShed:       b.totals[totRetriesShed].Load(),
		FirstAttemptsShed: b.totals[totFirstShed].Load(),
		Healthy:           b.totals[totHealthy].Load(),
		Failures:          b.totals[totFailures].Load(),
		Hinted:            b.totals[totHinted].Load(),
		InFlight:          b.inFlight.Load(),
		WindowRetries:     b.retries.sum(serial),
		WindowHealthy:     b.healthy.sum(serial),
		WindowInvited:     b.invited.sum(serial),
	}
	st.Allowance = b.allowance(st.WindowHealthy)
	return st
}

// now returns the time since b started.
func (b *Budget) now() time.Duration { return time.Since(b.start) }

// serial returns the window period of now.
func (b *Budget) serial(now time.Duration) uint32 { return uint32(int64(now) / b.s.bucketWidth) }

// allowance returns the retries a window with healthy healthy answers admits.
func (b *Budget) allowance(healthy uint64) float64 {
	return b.s.ratio*float64(healthy) + b.s.floor
}

// isRetry reports whether r is a retry: its attempt header is an integer
// above 0, or, without a valid attempt header, its key was seen within the
// key window (the key is recorded as seen now).
func (b *Budget) isRetry(r *http.Request, now time.Duration) bool {
	if v := r.Header[b.s.attemptHeader]; len(v) > 0 {
		if n, ok := parseAttempt(v[0]); ok {
			return n > 0
		}
	}
	if b.keys == nil {
		return false
	}
	v := r.Header[b.s.keyHeader]
	if len(v) == 0 || v[0] == "" {
		return false
	}
	return b.keys.seen(v[0], uint32(now/time.Millisecond))
}

// parseAttempt parses a non-negative decimal integer, spaces around it
// allowed, without allocating; values above a million are capped.
func parseAttempt(s string) (int, bool) {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if i == j {
		return 0, false
	}
	n := 0
	for ; i < j; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int(c-'0'), 1_000_000)
	}
	return n, true
}

// admitRetry counts a retry arriving at now with inFlight requests in the
// middleware (itself included) and reports whether it is admitted, with the
// reason if not.
func (b *Budget) admitRetry(now time.Duration, inFlight int64) (bool, int) {
	b.totals[totRetries].Add(1)
	if b.s.maxInFlight > 0 && inFlight > b.s.retryInFlight {
		b.totals[totRetriesShed].Add(1)
		return false, reasonOverload
	}
	serial := b.serial(now)
	if !b.retries.addBelow(serial, b.allowance(b.healthy.sum(serial))) {
		b.totals[totRetriesShed].Add(1)
		return false, reasonBudget
	}
	return true, 0
}

// admitFirst counts a first attempt arriving with inFlight requests in the
// middleware (itself included) and reports whether it is admitted.
func (b *Budget) admitFirst(inFlight int64) bool {
	b.totals[totFirst].Add(1)
	if b.s.maxInFlight > 0 && inFlight > b.s.maxInFlight {
		b.totals[totFirstShed].Add(1)
		return false
	}
	return true
}

// exhausted reports whether a failure answered now should carry pushback:
// the window's retries or its failures sent without pushback have reached
// the allowance, or retries are being shed for MaxInFlight.
func (b *Budget) exhausted(now time.Duration) bool {
	// In flight counts this request: the others are what a retry would find.
	if b.s.maxInFlight > 0 && b.inFlight.Load() > b.s.retryInFlight {
		return true
	}
	serial := b.serial(now)
	a := b.allowance(b.healthy.sum(serial))
	return float64(b.retries.sum(serial)) >= a || float64(b.invited.sum(serial)) >= a
}

// settle counts the outcome of a request the handler served: status is its
// final status, or 0 if it sent none (it panicked); hinted reports whether
// the answer carried pushback.
func (b *Budget) settle(now time.Duration, status int, hinted bool) {
	serial := b.serial(now)
	switch {
	case status != 0 && healthy(status):
		b.totals[totHealthy].Add(1)
		b.healthy.add(serial)
	case hinted:
		b.totals[totFailures].Add(1)
		b.totals[totHinted].Add(1)
	default:
		b.totals[totFailures].Add(1)
		b.invited.add(serial)
	}
}

// healthy reports whether status is a healthy answer: below 500, not 429.
func healthy(status int) bool {
	return status < 500 && status != http.StatusTooManyRequests
}
