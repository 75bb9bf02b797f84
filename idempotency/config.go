package idempotency

import (
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Config configures New. Every zero field means its documented default.
type Config struct {
	// KeyHeader is the request header that carries the key. Default
	// "Idempotency-Key".
	KeyHeader string
	// RequireKey makes a request without a key answer 400. By default such
	// a request is passed to the handler as it is, unstored and unmarked.
	RequireKey bool
	// Principal returns who is asking: a user or tenant id, or a
	// credential. The record keeps only its SHA-256, and a stored answer
	// is replayed only to the principal that stored it: another one, or
	// the same caller with a rotated credential, is refused (problem
	// principal-mismatch, MismatchStatus), never replayed and never run.
	// Default: the Authorization header; without one, every cookie but
	// those load balancers, CSRF protection and analytics set (a warning
	// is logged once: name the session cookies with CookiePrincipal, so
	// that a retry whose other cookies changed is replayed). Install
	// authentication before the middleware, so that Principal can read
	// what it established.
	Principal func(r *http.Request) string
	// Route returns the route template of the scope, without the method.
	// Default: the pattern http.ServeMux matched (r.Pattern, without its
	// method), else the path. Prefix it with a tenant id to let two
	// tenants use one key independently, as Stripe scopes keys by account.
	Route func(r *http.Request) string
	// Fingerprint identifies the request's payload. Default
	// DefaultFingerprint; see JSONFields for a subset of fields.
	Fingerprint FingerprintFunc
	// TTL is how long an answer is stored and replayed. Default 24 h.
	TTL time.Duration
	// Lease bounds a run of the handler when the request's context has no
	// deadline: the handler's context ends then (or earlier, at the
	// caller's time budget: see New). It is also the claim's
	// lease: while the handler runs, the claim is renewed every third of
	// Lease, and it passes on to a later request only Lease after its last
	// renewal (the owner's process died or was paused that long). Default
	// 1 min.
	Lease time.Duration
	// MaxBody is the largest request body read, in bytes; a larger one is
	// answered with 413 and runs nothing. Default 1 MiB.
	MaxBody int64
	// MaxAnswer is the largest answer body stored, in bytes. A larger one
	// is treated as a failure of the handler (see New). Default 1 MiB.
	MaxAnswer int64
	// Headers are the response headers stored and replayed, in canonical
	// form. Default DefaultHeaders.
	Headers []string
	// RetryAfter is the Retry-After of the 409 answered while a request
	// with the key runs. Default 1 s.
	RetryAfter time.Duration
	// Storage says which answers of the handler are stored and which are
	// released for a retry to run again. Default StorageByStore.
	Storage Storage
	// MismatchStatus is the status answered for a key reused with another
	// payload: 422 (default) or 409.
	MismatchStatus int
	// Now is the records' clock: when a request claims its key, and when
	// an answer expires. The handler's deadline stays on the real clock.
	// Default time.Now; tests set it to expire records without waiting.
	Now func() time.Time
	// Logger receives one event per decision (stored, replayed,
	// in_progress, mismatch, expired, released, store_error, panic,
	// unreadable_body, budget_spent; no_renewal, once, for a store whose
	// claims are not Renewers). Default slog.Default(): at its default
	// level (Info) a store failure or a panic is logged, a replay is not.
	// slog.New(slog.DiscardHandler) logs nothing.
	Logger *slog.Logger
}

// DefaultHeaders are the response headers stored by default: those that
// describe the body or the resource, never cookies or per-response ids.
var DefaultHeaders = []string{
	"Cache-Control", "Content-Encoding", "Content-Language", "Content-Location", "Content-Type",
	"Etag", "Expires", "Last-Modified", "Link", "Location", "Vary",
}

// Defaults of Config.
const (
	DefaultTTL        = 24 * time.Hour
	DefaultLease      = time.Minute
	DefaultMaxBody    = 1 << 20
	DefaultMaxAnswer  = 1 << 20
	DefaultRetryAfter = time.Second
)

// withDefaults returns c with its defaults resolved.
func (c Config) withDefaults() Config {
	if c.KeyHeader == "" {
		c.KeyHeader = "Idempotency-Key"
	}
	c.KeyHeader = http.CanonicalHeaderKey(c.KeyHeader)
	if c.Route == nil {
		c.Route = defaultRoute
	}
	if c.Fingerprint == nil {
		c.Fingerprint = DefaultFingerprint
	}
	c.TTL = orDefault(c.TTL, DefaultTTL)
	c.Lease = orDefault(c.Lease, DefaultLease)
	c.RetryAfter = orDefault(c.RetryAfter, DefaultRetryAfter)
	c.MaxBody = orDefault(c.MaxBody, DefaultMaxBody)
	c.MaxAnswer = orDefault(c.MaxAnswer, DefaultMaxAnswer)
	if c.Headers == nil {
		c.Headers = DefaultHeaders
	}
	h := make([]string, len(c.Headers))
	for i, name := range c.Headers {
		h[i] = http.CanonicalHeaderKey(name)
	}
	c.Headers = h
	if c.MismatchStatus == 0 {
		c.MismatchStatus = http.StatusUnprocessableEntity
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func orDefault[T int64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// defaultRoute is the pattern ServeMux matched, without its method, else
// the path.
func defaultRoute(r *http.Request) string {
	p := r.Pattern
	if p == "" {
		return r.URL.Path
	}
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t")
	}
	return p
}
