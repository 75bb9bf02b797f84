package redis

import "log/slog"

// Option configures New.
type Option func(*options)

type options struct {
	prefix   string
	volatile bool
	logger   *slog.Logger
}

// DefaultPrefix starts the name of every Redis key of a Store.
const DefaultPrefix = "idempotency:"

// WithPrefix sets the string that starts the name of every Redis key of the
// Store. Stores with different prefixes are independent. On Redis Cluster it
// must hold a hash tag ("{idem}:"). Default DefaultPrefix.
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// AllowVolatile lets New accept a Redis without the append-only file, or one
// whose CONFIG it cannot read: it logs a warning instead of failing. Records
// may then die with the Redis process, and a retry after that runs the
// handler again. For tests and caches.
func AllowVolatile() Option { return func(o *options) { o.volatile = true } }

// WithLogger sets where New logs its warnings about Redis's persistence.
// Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }
