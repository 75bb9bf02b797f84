package resilient

import "context"

// ctxValues is what a context carries for the Transport: the caller's key,
// the operation's name, the report to fill. The three live in one value
// under one context key, each setter copying the others from the parent,
// so that a request finds all three with one walk up its context chain
// (a server handler's context is often ten values deep) instead of three.
type ctxValues struct {
	key    string
	op     string
	report *Report
	hasKey bool
	hasOp  bool
}

type ctxValuesKey struct{}

// noValues are the values of a context that carries none.
var noValues ctxValues

// valuesOf returns the Transport's values in ctx (noValues if none). They
// must not be modified.
func valuesOf(ctx context.Context) *ctxValues {
	if v, ok := ctx.Value(ctxValuesKey{}).(*ctxValues); ok {
		return v
	}
	return &noValues
}

// withValues returns a copy of ctx whose values are ctx's, changed by set.
func withValues(ctx context.Context, set func(*ctxValues)) context.Context {
	v := *valuesOf(ctx)
	set(&v)
	return context.WithValue(ctx, ctxValuesKey{}, &v)
}

// ContextWithKey returns a copy of ctx carrying an idempotency key chosen by
// the caller. The Transport sends it on every attempt of a request made with
// that context (unless the request already has the key header), whatever the
// method. An invalid key makes RoundTrip fail with ErrInvalidKey before
// anything is sent.
func ContextWithKey(ctx context.Context, key string) context.Context {
	return withValues(ctx, func(v *ctxValues) { v.key, v.hasKey = key, true })
}

// KeyFromContext returns the key set with ContextWithKey.
func KeyFromContext(ctx context.Context) (string, bool) {
	v := valuesOf(ctx)
	return v.key, v.hasKey
}

// ContextWithOperation returns a copy of ctx naming a logical operation, such
// as "refund:ch_123". With a Store (WithStore), the Transport claims the
// operation's key from the Store before the first attempt — minting and
// persisting it on first sight — so a process that restarts after a crash and
// repeats the operation sends the same key. Without a Store the name is only
// reported.
func ContextWithOperation(ctx context.Context, op string) context.Context {
	return withValues(ctx, func(v *ctxValues) { v.op, v.hasOp = op, true })
}

// OperationFromContext returns the name set with ContextWithOperation.
func OperationFromContext(ctx context.Context) (string, bool) {
	v := valuesOf(ctx)
	return v.op, v.hasOp
}

// ContextWithReport returns a copy of ctx that makes the Transport fill r.
func ContextWithReport(ctx context.Context, r *Report) context.Context {
	return withValues(ctx, func(v *ctxValues) { v.report = r })
}
