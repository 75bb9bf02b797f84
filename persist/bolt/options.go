package bolt

import "time"

// Option configures Open.
type Option func(*options)

// options holds Open's settings; defaults are resolved in Open.
type options struct {
	lockTimeout   time.Duration
	maxBatchDelay time.Duration
	maxBatchSize  int
}

// Defaults of the options.
const (
	// DefaultLockTimeout is how long Open waits for the file lock.
	DefaultLockTimeout = 5 * time.Second
	// DefaultMaxBatchDelay is how long a group commit waits for more writes.
	DefaultMaxBatchDelay = time.Millisecond
	// DefaultMaxBatchSize is the most writes committed together.
	DefaultMaxBatchSize = 1000
)

// WithLockTimeout sets how long Open waits for the exclusive lock on the file,
// held by another Store (in this process or another) until it is closed. Past
// it, Open returns an error wrapping ErrLocked. Zero or negative waits
// forever. Default DefaultLockTimeout (5 s).
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// WithMaxBatchDelay sets how long a group commit waits for more writes
// (Claim, Finish, Delete) before it commits them in one transaction with one
// fsync. Only writes that arrive while another is in progress are grouped; a
// lone write commits at once. A longer delay makes bigger groups under load
// and slower writes. Zero or negative disables grouping: every write commits
// alone. Default DefaultMaxBatchDelay (1 ms).
func WithMaxBatchDelay(d time.Duration) Option {
	return func(o *options) { o.maxBatchDelay = d }
}

// WithMaxBatchSize sets the most writes grouped in one commit; a group that
// reaches it commits without waiting out the delay. Zero or negative disables
// grouping. Default DefaultMaxBatchSize (1000).
func WithMaxBatchSize(n int) Option {
	return func(o *options) { o.maxBatchSize = n }
}
