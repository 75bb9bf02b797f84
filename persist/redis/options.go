package redis

import "time"

// Option configures New.
type Option func(*options)

// options holds New's settings; defaults are resolved in New.
type options struct {
	prefix string
	ttl    time.Duration
}

// Defaults of the options.
const (
	// DefaultPrefix starts the name of every Redis key a Store uses.
	DefaultPrefix = "resilient:op:"
	// DefaultTTL is how long Redis keeps a record after its claim.
	DefaultTTL = 48 * time.Hour
)

// WithPrefix sets the string that starts the name of every Redis key the
// Store uses (see Store for the layout). Stores with different prefixes are
// independent. On Redis Cluster the prefix must hold a hash tag, for example
// "{resilient}:op:", so that all keys of a Store share one slot. An empty
// prefix is allowed. Default DefaultPrefix ("resilient:op:").
func WithPrefix(p string) Option {
	return func(o *options) { o.prefix = p }
}

// WithTTL sets how long Redis keeps a record after the Claim that created
// it, whatever its state: a safety net for records that Delete and Expire
// never reach. Zero or negative keeps records until they are deleted.
// Default DefaultTTL (48 h), twice the usual server retention window of
// idempotency keys.
func WithTTL(d time.Duration) Option {
	return func(o *options) { o.ttl = d }
}
