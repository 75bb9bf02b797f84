package pushback

import (
	"fmt"
	"math"
	"net/http"
	"net/textproto"
	"time"
)

// Default values of Config's fields, used where a field is zero.
const (
	// DefaultRatio admits retries up to half the healthy answers of the
	// window: every failure is retried while fewer than about a third of
	// the answers fail, and the budget is still nothing at total failure
	// (it grows only with healthy answers).
	DefaultRatio = 0.5
	// DefaultMinPerSecond admits one retry per second whatever the
	// answers, so that a quiet or just-started server still lets the odd
	// retry through; at 1,000 first attempts per second it is 0.1 % of the
	// load.
	DefaultMinPerSecond = 1.0
	// DefaultWindow is how long answers and retries count, as the 10 s ttl
	// of Finagle's and Linkerd's retry budgets.
	DefaultWindow = 10 * time.Second
	// DefaultBuckets splits the window into one-second buckets.
	DefaultBuckets = 10
	// DefaultRetryInFlightShare sheds retries once three quarters of
	// MaxInFlight are in service, keeping the last quarter for first
	// attempts.
	DefaultRetryInFlightShare = 0.75
	// DefaultRetryAfter is the shortest Retry-After of a pushback answer:
	// one bucket of the default window, after which the budget may have
	// changed.
	DefaultRetryAfter = time.Second
	// DefaultRetryAfterJitter spreads Retry-After over 1 or 2 seconds, so
	// that the clients pushed back in one second do not all come back in
	// the same one.
	DefaultRetryAfterJitter = time.Second
	// DefaultAttemptHeader is the request header that numbers attempts:
	// 0 on a first attempt, n on the n-th retry. It is what resilient sends.
	DefaultAttemptHeader = "Retry-Attempt"
	// DefaultKeyHeader is the request header whose repetition marks a
	// retry when a request carries no attempt header.
	DefaultKeyHeader = "Idempotency-Key"
	// DefaultKeyWindow is how long an idempotency key is remembered.
	DefaultKeyWindow = 10 * time.Second
	// DefaultKeySlots is the size of the table of recent keys: 64 Ki
	// slots of 8 bytes, 512 KiB.
	DefaultKeySlots = 1 << 16
)

// Config configures a Budget. Every zero field means the documented
// default, so the zero Config is the recommended setup; New resolves the
// defaults once.
type Config struct {
	// Ratio is how many retries the window admits per healthy answer in it
	// (an answer with a status below 500, other than 429). Default
	// DefaultRatio (0.5); a negative value admits no retries but the floor
	// (MinPerSecond).
	Ratio float64
	// MinPerSecond is the floor of the budget: the window admits
	// MinPerSecond × Window retries on top of the Ratio share, so that a
	// server with few answers still admits some retries. It is also the
	// retry load the server accepts at total failure. Default
	// DefaultMinPerSecond (1); a negative value means no floor.
	MinPerSecond float64
	// Window is how long retries and answers count. Default DefaultWindow
	// (10 s).
	Window time.Duration
	// Buckets is the number of buckets the window is kept in: counts
	// expire one bucket (Window/Buckets) at a time. Default DefaultBuckets
	// (10).
	Buckets int
	// MaxInFlight, if positive, bounds the requests in service: above it,
	// first attempts are shed with pushback, and retries are shed as soon
	// as RetryInFlightShare × MaxInFlight are in service. Default 0: no
	// bound (the budget alone decides).
	MaxInFlight int
	// RetryInFlightShare is the share of MaxInFlight above which retries
	// are shed. Default DefaultRetryInFlightShare (0.75); values above 1
	// count as 1.
	RetryInFlightShare float64
	// Status is the status of a pushback answer: 503 or 429. Default 503.
	Status int
	// RetryAfter is the shortest Retry-After of a pushback answer, rounded
	// up to whole seconds, at least 1. Default DefaultRetryAfter (1 s).
	RetryAfter time.Duration
	// RetryAfterJitter is the spread of Retry-After: each pushback answer
	// draws a whole number of seconds from [RetryAfter, RetryAfter +
	// RetryAfterJitter], uniformly. Default DefaultRetryAfterJitter (1 s);
	// a negative value means none.
	RetryAfterJitter time.Duration
	// AttemptHeader names the request header that numbers attempts (0 on
	// a first attempt, n on the n-th retry). Default DefaultAttemptHeader
	// ("Retry-Attempt").
	AttemptHeader string
	// KeyHeader names the request header whose value, seen again within
	// KeyWindow, marks a request without an attempt header as a retry.
	// Default DefaultKeyHeader ("Idempotency-Key").
	KeyHeader string
	// KeyWindow is how long a key is remembered. Default DefaultKeyWindow
	// (10 s); a negative value turns the detection by key off.
	KeyWindow time.Duration
	// KeySlots is the size of the table of recent keys, rounded up to a
	// power of two; see the README for what a full table does. Default
	// DefaultKeySlots (65,536).
	KeySlots int
	// Seed, if not 0, fixes the middleware's random choices: the hash of
	// the table of recent keys and each pushback answer's Retry-After
	// draw. The same requests in the same order then get the same answers,
	// so that a test or a simulation replays exactly. Default 0: a random
	// seed per Budget. Keep it 0 in production: a client that knows the
	// seed can choose keys that collide in the table (see the README).
	Seed uint64
}

// settings is a Config with its defaults resolved.
type settings struct {
	ratio         float64
	floor         float64 // MinPerSecond × Window: retries the window admits at no healthy answer
	bucketWidth   int64   // nanoseconds
	buckets       int
	maxInFlight   int64
	retryInFlight int64 // retries are shed when in flight ≥ this (MaxInFlight > 0)
	status        int
	raMin, raMax  int // Retry-After range, whole seconds
	attemptHeader string
	keyHeader     string
	keyWindowMs   uint32 // 0: no detection by key
	keySlots      int
	seed          uint64 // Config.Seed; 0: random
}

// resolve returns c's settings. It panics if a field is invalid: a Status
// other than 0, 429 and 503, or a negative or NaN value where none is
// allowed.
func (c Config) resolve() settings {
	s := settings{
		ratio:         orDefault(c.Ratio, DefaultRatio),
		buckets:       c.Buckets,
		status:        c.Status,
		attemptHeader: c.AttemptHeader,
		keyHeader:     c.KeyHeader,
		keySlots:      c.KeySlots,
		seed:          c.Seed,
	}
	window := c.Window
	switch {
	case window < 0, c.Buckets < 0, c.MaxInFlight < 0, c.KeySlots < 0, c.RetryAfter < 0,
		math.IsNaN(c.Ratio), math.IsNaN(c.MinPerSecond), math.IsNaN(c.RetryInFlightShare),
		c.RetryInFlightShare < 0, math.IsInf(c.Ratio, 0), math.IsInf(c.MinPerSecond, 0):
		panic(fmt.Sprintf("pushback: invalid Config %+v", c))
	}
	if window == 0 {
		window = DefaultWindow
	}
	if s.buckets == 0 {
		s.buckets = DefaultBuckets
	}
	s.bucketWidth = max(1, int64(window)/int64(s.buckets))
	window = time.Duration(s.bucketWidth * int64(s.buckets))
	s.floor = orDefault(c.MinPerSecond, DefaultMinPerSecond) * window.Seconds()

	s.maxInFlight = int64(c.MaxInFlight)
	share := c.RetryInFlightShare
	if share == 0 {
		share = DefaultRetryInFlightShare
	}
	s.retryInFlight = max(1, int64(math.Ceil(min(share, 1)*float64(c.MaxInFlight))))

	switch s.status {
	case 0:
		s.status = http.StatusServiceUnavailable
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
	default:
		panic(fmt.Sprintf("pushback: Status %d: want 503 or 429", c.Status))
	}
	ra := c.RetryAfter
	if ra == 0 {
		ra = DefaultRetryAfter
	}
	jitter := c.RetryAfterJitter
	if jitter == 0 {
		jitter = DefaultRetryAfterJitter
	}
	s.raMin = max(1, ceilSeconds(ra))
	s.raMax = s.raMin
	if jitter > 0 {
		s.raMax = s.raMin + ceilSeconds(jitter)
	}

	if s.attemptHeader == "" {
		s.attemptHeader = DefaultAttemptHeader
	}
	s.attemptHeader = textproto.CanonicalMIMEHeaderKey(s.attemptHeader)
	if s.keyHeader == "" {
		s.keyHeader = DefaultKeyHeader
	}
	s.keyHeader = textproto.CanonicalMIMEHeaderKey(s.keyHeader)
	switch kw := c.KeyWindow; {
	case kw < 0:
		s.keyWindowMs = 0
	case kw == 0:
		s.keyWindowMs = uint32(DefaultKeyWindow / time.Millisecond)
	default:
		s.keyWindowMs = uint32(max(1, min(kw/time.Millisecond, math.MaxUint32/2)))
	}
	if s.keySlots == 0 {
		s.keySlots = DefaultKeySlots
	}
	return s
}

// orDefault returns def for 0, 0 for a negative v, else v.
func orDefault(v, def float64) float64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// ceilSeconds returns d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
