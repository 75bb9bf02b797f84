package resilient

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/resilienthttp/resilient/persist"
	"golang.org/x/time/rate"
)

// Defaults, applied by NewTransport when an option does not say otherwise.
const (
	DefaultMaxAttempts   = 4
	DefaultRetryAfterMax = 30 * time.Second
	DefaultMaxBodyBuffer = 1 << 20
	DefaultKeyHeader     = "Idempotency-Key"
	DefaultAttemptHeader = "Retry-Attempt"
	DefaultKeyRetention  = 24 * time.Hour
	defaultBackoffBase   = 100 * time.Millisecond
	defaultBackoffMax    = 2 * time.Second
	defaultDrainLimit    = 64 << 10
)

// Option configures a Transport. Options are applied in order; the last one
// that sets a value wins.
type Option func(*config)

// config is the resolved configuration of a Transport, fixed at construction.
type config struct {
	maxAttempts    int
	backoff        Backoff
	classifier     Classifier
	budgetOff      bool
	budget         *Budget // shared by every host when set
	budgetConfig   BudgetConfig
	breakerOff     bool
	breaker        BreakerSettings
	rateLimit      rate.Limit
	rateBurst      int
	keyHeader      string
	attemptHeader  string
	keyFunc        func() (string, error)
	keyMethods     methodSet
	store          persist.Store
	keyRetention   time.Duration
	attemptTimeout time.Duration
	retryAfterMax  time.Duration
	maxBodyBuffer  int64
	logger         *slog.Logger
	observers      []Observer
	now            func() time.Time // test seam; time.Now unless set in tests
}

func defaultConfig() config {
	return config{
		maxAttempts:   DefaultMaxAttempts,
		backoff:       FullJitter(defaultBackoffBase, defaultBackoffMax),
		classifier:    DefaultClassifier,
		budgetConfig:  DefaultBudgetConfig(),
		breaker:       DefaultBreakerSettings(),
		rateLimit:     rate.Inf,
		keyHeader:     DefaultKeyHeader,
		attemptHeader: DefaultAttemptHeader,
		keyFunc:       NewKey,
		keyMethods:    newMethodSet(http.MethodPost, http.MethodPatch),
		keyRetention:  DefaultKeyRetention,
		retryAfterMax: DefaultRetryAfterMax,
		maxBodyBuffer: DefaultMaxBodyBuffer,
		now:           time.Now,
	}
}

// WithMaxAttempts sets the total number of attempts per request, the first
// included (default 4). 1 disables retries; values below 1 are treated as 1.
func WithMaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts = max(n, 1) }
}

// WithBackoff sets the wait between attempts (default FullJitter(100ms, 2s)).
// A nil Backoff means no wait beyond server-directed delays.
func WithBackoff(b Backoff) Option {
	return func(c *config) { c.backoff = b }
}

// WithClassifier sets the function that decides success, retry or terminal
// (default DefaultClassifier). A nil Classifier restores the default.
func WithClassifier(f Classifier) Option {
	return func(c *config) {
		if f == nil {
			f = DefaultClassifier
		}
		c.classifier = f
	}
}

// WithBudget makes every request of the Transport spend retries from b,
// whatever its host, so that several Transports can share one budget. By
// default each destination host has its own budget with
// DefaultBudgetConfig. A nil b restores the default.
func WithBudget(b *Budget) Option {
	return func(c *config) { c.budget, c.budgetOff = b, false }
}

// WithBudgetConfig sets the configuration of the per-host budgets the
// Transport creates (default DefaultBudgetConfig()).
func WithBudgetConfig(bc BudgetConfig) Option {
	return func(c *config) { c.budgetConfig, c.budget, c.budgetOff = bc, nil, false }
}

// WithoutBudget turns the retry budget off: only WithMaxAttempts limits
// retries.
func WithoutBudget() Option {
	return func(c *config) { c.budgetOff, c.budget = true, nil }
}

// WithBreaker sets the settings of the per-host circuit breakers (default
// DefaultBreakerSettings()). Zero fields take their defaults.
func WithBreaker(s BreakerSettings) Option {
	return func(c *config) { c.breaker, c.breakerOff = s, false }
}

// WithoutBreaker turns the circuit breakers off.
func WithoutBreaker() Option {
	return func(c *config) { c.breakerOff = true }
}

// WithRateLimit paces requests to each destination host with a token bucket
// of r requests per second and the given burst (golang.org/x/time/rate).
// Every attempt, first or retry, waits for a token, honouring the request's
// context. Default: no limit (rate.Inf).
func WithRateLimit(r rate.Limit, burst int) Option {
	return func(c *config) { c.rateLimit, c.rateBurst = r, max(burst, 1) }
}

// WithKeyHeader sets the name of the idempotency key header (default
// "Idempotency-Key").
func WithKeyHeader(name string) Option {
	return func(c *config) {
		if name != "" {
			c.keyHeader = http.CanonicalHeaderKey(name)
		}
	}
}

// WithAttemptHeader sets the name of the header that carries the attempt
// number, 0 for the first (default "Retry-Attempt"), so servers can shed
// retries first. An empty name turns it off.
func WithAttemptHeader(name string) Option {
	return func(c *config) { c.attemptHeader = http.CanonicalHeaderKey(name) }
}

// WithKeyFunc sets the function that mints keys (default NewKey, a UUIDv7).
// Its keys must pass ValidateKey.
func WithKeyFunc(f func() (string, error)) Option {
	return func(c *config) {
		if f == nil {
			f = NewKey
		}
		c.keyFunc = f
	}
}

// WithKeyMethods sets the methods for which the Transport mints a key when
// the caller set none (default POST and PATCH). With no methods, keys are sent
// only when the caller sets one.
func WithKeyMethods(methods ...string) Option {
	return func(c *config) { c.keyMethods = newMethodSet(methods...) }
}

// WithStore makes the Transport claim the key of every request whose context
// names an operation (ContextWithOperation) from s before the first attempt,
// and record the outcome there: Done after a definitive answer, Pending when
// the outcome is unknown.
func WithStore(s persist.Store) Option {
	return func(c *config) { c.store = s }
}

// WithKeyRetention sets how long servers are assumed to keep idempotency
// keys (default 24 h). A pending key older than this, by its UUIDv7
// timestamp or its record's creation time, is not reused: RoundTrip fails
// with ErrKeyExpired.
func WithKeyRetention(d time.Duration) Option {
	return func(c *config) { c.keyRetention = d }
}

// WithAttemptTimeout bounds each attempt, separately from the caller's
// context (which bounds the whole request, waits included). An attempt that
// times out is classified DEPENDENCY.timeout and retried if it is safe to.
// Default: none. The timeout covers reading the response body of the attempt
// that is returned.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) { c.attemptTimeout = d }
}

// WithRetryAfterMax sets the longest server-directed delay (Retry-After,
// RateLimit) the Transport waits (default 30 s). A longer one is not waited
// for: the response is returned at once. 0 (or a negative value) waits for no
// server-directed delay at all.
func WithRetryAfterMax(d time.Duration) Option {
	return func(c *config) { c.retryAfterMax = max(d, 0) }
}

// maxBodyBufferLimit keeps limit+1 from overflowing in the body reader.
const maxBodyBufferLimit = 1 << 50

// WithMaxBodyBuffer sets how many bytes of a request body without GetBody
// the Transport buffers to replay it (default 1 MiB). A longer body is sent
// once, without retries.
func WithMaxBodyBuffer(n int64) Option {
	return func(c *config) { c.maxBodyBuffer = min(max(n, 0), maxBodyBufferLimit) }
}

// WithLogger logs one record per retry decision and per final outcome at
// Debug (retries) and Info or Warn (outcomes) with the attributes
// idempotency_key, attempt, delay, status, category and outcome. Nothing is
// logged by default. Headers and bodies are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithObserver adds a function called with every Event (attempt, retry,
// outcome, breaker change). Observers run synchronously on the request's
// goroutine, never under a lock of the Transport; keep them fast.
func WithObserver(o Observer) Option {
	return func(c *config) {
		if o != nil {
			c.observers = append(c.observers, o)
		}
	}
}
