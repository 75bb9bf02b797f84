package postgres

import (
	"context"
	"errors"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
)

// ErrClaimNotCommitted is wrapped by the error Claim returns for a bound
// call (see Bind and WithBoundCalls) whose operation has no committed
// record: its ClaimTx has not committed yet, rolled back, or never ran. The
// resilient Transport then fails the call with ErrStore before sending
// anything; errors.Is finds ErrClaimNotCommitted through it.
var ErrClaimNotCommitted = errors.New("persist/postgres: the operation's claim is not committed")

// boundKey is the context key of a bound call.
type boundKey struct{}

// Bind returns a copy of ctx for a call that carries the claim rec, made
// by ClaimTx: it names rec.Operation (resilient.ContextWithOperation) and,
// if rec.Key is set, the key (resilient.ContextWithKey). Through a resilient
// Transport with WithStore(s), where s is a Store of this package, the call
// is bound to that claim:
//
//   - if the claim is committed, the call sends rec's key;
//   - if it is not (ClaimTx's transaction is still open, rolled back, or
//     never ran), the Transport's Claim inserts nothing and the call fails
//     before sending, with an error wrapping ErrClaimNotCommitted;
//   - if the operation's record holds another key, the call fails before
//     sending with resilient.ErrOperationMismatch.
//
// Bound to the zero record (what a failed ClaimTx returns), the call fails
// before sending with ErrClaimNotCommitted, as for a claim that did not
// commit.
//
// A bound call never waits for an open transaction: it fails at once. A
// call made before the commit is an error of the application's (waiting
// would hold a connection while the application's transaction holds
// another, and a call from inside that transaction would wait for itself).
// Commit first, then call.
func Bind(ctx context.Context, rec persist.Record) context.Context {
	if rec.Operation == "" {
		// The zero record of a failed ClaimTx: a call that names no
		// operation would not reach the Store at all, and would be sent.
		return context.WithValue(resilient.ContextWithOperation(ctx, noClaim), boundKey{}, bound{none: true})
	}
	ctx = resilient.ContextWithOperation(ctx, rec.Operation)
	if rec.Key != "" {
		ctx = resilient.ContextWithKey(ctx, rec.Key)
	}
	return context.WithValue(ctx, boundKey{}, bound{key: rec.Key})
}

// noClaim is the operation name of a call bound to the zero record.
const noClaim = "\x00persist/postgres: bound to no claim"

// bound is what Bind puts in a context.
type bound struct {
	key  string // the claim's key, "" for any
	none bool   // bound to the zero record: there is no claim to find
}

// boundFromContext returns what Bind put in ctx, and whether it did.
func boundFromContext(ctx context.Context) (bound, bool) {
	b, ok := ctx.Value(boundKey{}).(bound)
	return b, ok
}
