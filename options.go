package resilient

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/host"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/resilienthttp/resilient/internal/wire"
	"github.com/resilienthttp/resilient/persist"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// The header names the Transport sends by default (see WithKeyHeader and
// WithAttemptHeader); a server, a proxy or a test reads them.
const (
	DefaultKeyHeader     = "Idempotency-Key"
	DefaultAttemptHeader = "Retry-Attempt"
)

// The other defaults, each documented on its option.
const (
	defaultMaxAttempts   = 4
	defaultRetryAfterMax = 30 * time.Second
	defaultMaxBodyBuffer = 1 << 20
	defaultKeyRetention  = 24 * time.Hour
	defaultBackoffBase   = 100 * time.Millisecond
	defaultBackoffMax    = 2 * time.Second
)

// Option configures a Transport. Options are applied in order; the last one
// that sets a value wins.
//
// The zero value of every option's argument is documented on the option.
// It is never a trap. A zero duration, a zero config field or an empty name
// means the default. Where "none" is the only sensible reading, it means
// nothing: WithAttemptTimeout(0) or a nil Observer. No zero makes a
// Transport fail requests it would otherwise send. WithMaxAttempts(0) and
// WithMaxBodyBuffer(0) mean no retries and no buffering. That is the
// reading a bare net/http client has anyway.
type Option func(*config)

// config is the resolved configuration of a Transport, fixed at construction.
type config struct {
	maxAttempts      int
	backoff          Backoff
	classifier       Classifier
	customClassifier bool // WithClassifier set one: it may read Outcome.Now
	observed         bool // an Observer, hedging or a custom Classifier reads every attempt (see call.unobserved)
	// The retry controls, set by WithRetryControl.
	tokensOff    bool
	tokens       RetryTokens
	budgetConfig *RetryBudget // a budget per host when set
	budgetFunc   SharedBudget // a budget kept elsewhere when set
	breaker      *CircuitBreaker
	rateLimit    rate.Limit // rate.Inf: no limit
	rateBurst    int
	keyHeader    string
	// keyWire is the spelling keyHeader is sent under when the Transport
	// adds the key (resolved by NewTransport). net/http re-sends a request
	// by itself after a reused connection dies, once it holds the
	// canonical Idempotency-Key or X-Idempotency-Key
	// (Request.isReplayable). That is a second effect where the first was
	// applied and the server ignores keys. The lower-case spelling is the
	// same field on the wire: field names are case-insensitive, and HTTP/2
	// sends them in lower case. Under it, net/http re-sends only what a
	// bare client's would.
	keyWire          string
	attemptHeader    string
	keyFunc          func() (string, error) // nil: the Transport's keySource (NewKey's UUIDv7s)
	keyMethods       wire.MethodSet
	dedupers         []dedupingServer
	refusalResponses bool
	outer            outerMode            // WithOuterRetries
	outerHosts       map[string]outerMode // WithOuterRetries with hosts; nil if none
	store            persist.Store
	keyRetention     time.Duration
	attemptTimeout   time.Duration
	timeBudget       bool     // WithTimeBudgetHeader
	hedge            *hedging // nil: no hedging (WithHedging)
	retryAfterMax    time.Duration
	maxBodyBuffer    int64
	logger           *slog.Logger
	observers        []Observer
	clock            *clock.Clock // the Transport's (NewTransport)
}

// plainCalls reports whether cfg lets a request be a plain call: nothing
// observes its attempts, no key function of the application's makes its
// keys, and no rate limiter, breaker, attempt timeout, time budget header,
// hedging or outer loop setting applies to every call.
func (c *config) plainCalls() bool {
	return !c.observed && c.keyFunc == nil && c.breaker == nil && c.rateLimit == rate.Inf && c.attemptTimeout == 0 &&
		!c.timeBudget && c.hedge == nil && c.outer != outerAlways && c.outerHosts == nil
}

// now returns the current time by c's clock.
func (c *config) now() time.Time { return c.clock.Now() }

// nanos returns the current time by c's clock in Unix nanoseconds: the
// Transport's own times are kept so (clock).
func (c *config) nanos() int64 { return c.clock.Nanos() }

// idleAfter is how long a host's state is kept without requests: the
// longest window among its policies.
func (c *config) idleAfter() time.Duration {
	d := retrycontrol.TokensConfig(c.tokens).Span()
	if c.budgetConfig != nil {
		d = max(d, c.budgetConfig.span())
	}
	if c.breaker != nil {
		d = max(d, c.breaker.Window, c.breaker.OpenTimeout)
	}
	return d
}

func defaultConfig() config {
	return config{
		maxAttempts:   defaultMaxAttempts,
		backoff:       FullJitter(defaultBackoffBase, defaultBackoffMax),
		classifier:    DefaultClassifier,
		rateLimit:     rate.Inf,
		keyHeader:     DefaultKeyHeader,
		attemptHeader: DefaultAttemptHeader,
		keyMethods:    wire.NewMethodSet(http.MethodPost, http.MethodPatch),
		keyRetention:  defaultKeyRetention,
		retryAfterMax: defaultRetryAfterMax,
		maxBodyBuffer: defaultMaxBodyBuffer,
	}
}

// WithMaxAttempts sets the total number of attempts per request, the first
// included (default 4). 1 disables retries; 0 and negative values are
// treated as 1 (no retries; a request is always sent once).
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
		c.customClassifier = f != nil
		if f == nil {
			f = DefaultClassifier
		}
		c.classifier = f
	}
}

// WithKeyHeader sets the name of the idempotency key header (default
// "Idempotency-Key", DefaultKeyHeader). An empty name sets nothing. The name
// in force (the default, or an earlier WithKeyHeader) stays. So a setting
// read from an unset variable never turns keys off. To send no key of the
// Transport's own, use WithKeyMethods with no methods.
func WithKeyHeader(name string) Option {
	return func(c *config) {
		if name != "" {
			c.keyHeader = http.CanonicalHeaderKey(name)
		}
	}
}

// WithAttemptHeader sets the name of the header that carries the attempt
// number (default "Retry-Attempt", DefaultAttemptHeader). Servers can then
// shed retries first. It is sent on every retry (1, 2, …). A first attempt
// goes without it: a request without the header is a first attempt. If the
// caller set the header, the Transport sets it to 0 on a first attempt. An
// empty name sends no attempt header, and retries go out as the caller made
// them. That suits a server that refuses headers it does not know, or a
// signature that covers every header.
func WithAttemptHeader(name string) Option {
	return func(c *config) {
		c.attemptHeader = ""
		if name != "" {
			c.attemptHeader = http.CanonicalHeaderKey(name)
		}
	}
}

// WithKeyFunc sets the function that mints keys (default: UUIDv7s as
// NewKey mints them). Its keys must pass ValidateKey. An error from f, or a
// key that does not pass, fails the request (ErrInvalidKey) before anything
// is sent. f is called once per operation, never per attempt. With a Store,
// it is called once per claim of a named operation. That includes a claim
// where the Store already holds the operation's key: the claim is one
// atomic step with a candidate key, which is then discarded. A nil f
// restores the default.
func WithKeyFunc(f func() (string, error)) Option {
	return func(c *config) { c.keyFunc = f }
}

// WithKeyMethods sets the methods for which the Transport mints a key when
// the caller set none (default POST and PATCH). With no methods, keys are sent
// only when the caller sets one (ContextWithKey, or the header).
func WithKeyMethods(methods ...string) Option {
	return func(c *config) { c.keyMethods = wire.NewMethodSet(methods...) }
}

// WithStore makes the Transport claim keys from s. A request whose context
// names an operation (ContextWithOperation) claims its key before the first
// attempt. Its outcome is recorded there: Done after a definitive answer,
// Pending when the outcome is unknown. A nil s means no Store (the
// default).
func WithStore(s persist.Store) Option {
	return func(c *config) { c.store = s }
}

// WithKeyRetention sets how long servers are assumed to keep idempotency
// keys (default 24 h; 0 or negative means the default). A key as old as
// this or older is not reused. Its age comes from its UUIDv7 timestamp or
// its Store record's creation time. A named operation whose stored key is
// that old fails with ErrKeyExpired before a first attempt. A retry that
// would go out that late is not sent. The last answer is returned, with
// ErrKeyExpired as the reason. A first attempt with the caller's own key
// (header or ContextWithKey) is sent, as a bare client would send it. A key
// of the application's own that is not a UUIDv7 has no known age. To turn
// the check off, give a retention no key reaches, such as 100 years.
func WithKeyRetention(d time.Duration) Option {
	return func(c *config) { c.keyRetention = orDefault(d, defaultKeyRetention) }
}

// orDefault returns d, or def when d is 0 or negative.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// WithAttemptTimeout bounds each attempt, separately from the caller's
// context (which bounds the whole request, waits included). An attempt that
// times out is classified DEPENDENCY.timeout and retried if it is safe to.
// Default: none; 0 or negative means none. The timeout covers reading the
// response body of the attempt that is returned.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) { c.attemptTimeout = d }
}

// WithRetryAfterMax sets the longest server-directed delay (Retry-After,
// RateLimit) the Transport waits (default 30 s). A longer one is not waited
// for: the response is returned at once. 0 or negative means the default.
// The maximum also bounds how long a server's pushback holds retries.
func WithRetryAfterMax(d time.Duration) Option {
	return func(c *config) { c.retryAfterMax = orDefault(d, defaultRetryAfterMax) }
}

// maxBodyBufferLimit keeps limit+1 from overflowing in the body reader.
const maxBodyBufferLimit = 1 << 50

// WithMaxBodyBuffer sets how many bytes of a request body without GetBody
// the Transport buffers to replay it (default 1 MiB). A longer body is sent
// once, without retries. 0 or negative buffers nothing: every such body is
// sent once, as a bare client sends it.
func WithMaxBodyBuffer(n int64) Option {
	return func(c *config) { c.maxBodyBuffer = min(max(n, 0), maxBodyBufferLimit) }
}

// WithLogger logs one record per retry decision and per final outcome.
// Retries log at Debug, outcomes at Info or Warn. The attributes are
// idempotency_key, attempt, delay, status, category and outcome. Nothing is
// logged by default; a nil l logs nothing. Headers and bodies are never
// logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithObserver adds a function called with every Event (attempt, retry,
// outcome, breaker change). Observers run synchronously on the request's
// goroutine, never under a lock of the Transport; keep them fast. A nil
// Observer is ignored.
func WithObserver(o Observer) Option {
	return func(c *config) {
		if o != nil {
			c.observers = append(c.observers, o)
		}
	}
}

// hostConfig returns how a Transport of c configures its hosts.
func (c *config) hostConfig() host.Config {
	hc := host.Config{Clock: c.clock, RateLimit: c.rateLimit, RateBurst: c.rateBurst, AttemptTimeout: c.attemptTimeout}
	if !c.tokensOff {
		tc := retrycontrol.TokensConfig(c.tokens)
		hc.Tokens = &tc
	}
	switch {
	case c.budgetConfig != nil:
		bc := *c.budgetConfig
		hc.Budget = func(string) host.Budget { return newBudget(bc) }
	case c.budgetFunc != nil:
		f := c.budgetFunc
		hc.Budget = func(name string) host.Budget { return f(name) } // a nil Budget is a nil host.Budget
	}
	if c.breaker != nil {
		bc := host.BreakerConfig(c.breaker.resolved())
		hc.Breaker, hc.RetriesOnly = &bc, bc.RetriesOnly
	}
	if hg := c.hedge; hg != nil {
		hc.Quantile = hg.quantile
	}
	if obs := c.observers; len(obs) > 0 {
		hc.OnTransition = func(host string, from, to gobreaker.State) {
			for _, o := range obs {
				o(context.Background(), Event{Kind: EventBreaker, Host: host, From: fromGobreaker(from), To: fromGobreaker(to)})
			}
		}
	}
	return hc
}

// WithTimeBudgetHeader sends the caller's remaining time with every
// attempt, in milliseconds: X-Request-Timeout: 300. A server can then stop
// working on a request that nobody waits for any more. The time is taken
// when the attempt is sent. It is what is
// left of the request context's deadline, or of the attempt timeout
// (WithAttemptTimeout) when that ends first. http.Client.Timeout sets such
// a deadline too. An attempt without a deadline goes without the header.
// A header the caller set is sent as it is. Default: off.
func WithTimeBudgetHeader() Option {
	return func(c *config) { c.timeBudget = true }
}

// dedupingServer is one WithDedupingServer entry.
type dedupingServer struct {
	host, pathPrefix string
}

// WithDedupingServer declares servers known to dedupe unsafe requests by
// their idempotency key. The Transport may then re-send a POST or PATCH
// that may have been applied. Each entry is a host ("api.example.com",
// with its port if the URL has one). A path prefix may follow it
// ("api.example.com/v1/payments"). A leading "https://" or "http://" is
// ignored, and an empty entry declares nothing. Without it, an unsafe
// request that may have been applied is re-sent only in two cases. The
// server has shown, on that route, that it dedupes (see ErrUnsafeRetry).
// Or the key is the application's own.
func WithDedupingServer(entries ...string) Option {
	return func(c *config) {
		for _, e := range entries {
			e = strings.TrimPrefix(strings.TrimPrefix(e, "https://"), "http://")
			host, path, _ := strings.Cut(e, "/")
			if host == "" {
				continue // an empty entry, or a bare path: no host to declare
			}
			c.dedupers = append(c.dedupers, dedupingServer{host: host, pathPrefix: "/" + path})
		}
	}
}

// declaredDeduping reports whether the application declared req's server
// as one that dedupes.
func (c *config) declaredDeduping(req *http.Request) bool {
	path := req.URL.Path
	if path == "" {
		path = "/"
	}
	for _, d := range c.dedupers {
		host := d.host == req.URL.Host || strings.Trim(d.host, "[]") == req.URL.Hostname()
		if host && strings.HasPrefix(path, d.pathPrefix) {
			return true
		}
	}
	return false
}
