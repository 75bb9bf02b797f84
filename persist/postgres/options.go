package postgres

import "time"

// Option configures New.
type Option func(*options)

// options holds New's settings; defaults are resolved in New.
type options struct {
	table []string
	lease time.Duration
	bound bool
}

// Defaults of the options.
const (
	// DefaultTable is the name of the Store's table.
	DefaultTable = "resilient_operations"
	// DefaultLease is how long a claim holds an operation's lease when its
	// context has no later deadline.
	DefaultLease = 2 * time.Minute
)

// WithTable sets the Store's table: one name, or a schema and a name
// ("app", "operations" for app.operations). Each part is quoted as given.
// Stores with different tables are independent. Default DefaultTable.
func WithTable(name ...string) Option {
	return func(o *options) { o.table = name }
}

// WithLease sets how long ClaimTx and Claim give the caller the lease of an
// operation (Claim extends it to the context's deadline if that is later):
// the time within which the inline call must have claimed its key and ended
// its attempts, after which a Resumer may take the operation over. Zero or
// negative is taken as one microsecond. Default DefaultLease (2 min).
func WithLease(d time.Duration) Option {
	return func(o *options) { o.lease = d }
}

// WithBoundCalls makes every call through the Store bound (see Bind): the
// Transport's Claim never inserts a record, so that only operations the
// application claimed with ClaimTx, and committed, are ever sent. A call
// naming an operation without a committed record fails before sending,
// with an error wrapping ErrClaimNotCommitted. Store.Claim then departs
// from persist.Store's contract (it does not store a new candidate), which
// is the point. Default off: a Claim of an unknown operation creates its
// record, as with the other Stores.
func WithBoundCalls() Option {
	return func(o *options) { o.bound = true }
}
