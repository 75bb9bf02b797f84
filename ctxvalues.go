package resilient

import (
	"context"
	"sync/atomic"
)

// ctxKey keys what a context carries for the Transport. The key, the
// operation's name and the report are three values, each found on its own.
// A context type may merge two contexts' values, trying one, then the
// other. It still yields each of them, wherever it was set.
type ctxKey int

const (
	keyCtxKey ctxKey = iota
	opCtxKey
	reportCtxKey
	outerCtxKey
)

// ContextWithKey returns a copy of ctx carrying an idempotency key chosen by
// the caller. The Transport sends it on every attempt of a request made with
// that context (unless the request already has the key header), whatever the
// method. An invalid key makes RoundTrip fail with ErrInvalidKey before
// anything is sent.
func ContextWithKey(ctx context.Context, key string) context.Context {
	setCtx(keyCtxKey)
	return context.WithValue(ctx, keyCtxKey, key)
}

// keyFromContext returns the key set with ContextWithKey. The three
// lookups assign named results under the check of ctxKinds: that form is
// inlined, a return inside the check is not.
func keyFromContext(ctx context.Context) (k string, ok bool) {
	if ctxKinds.Load()&(1<<keyCtxKey) != 0 {
		k, ok = ctx.Value(keyCtxKey).(string)
	}
	return
}

// ContextWithOperation returns a copy of ctx naming a logical operation, such
// as "refund:ch_123". With a Store (WithStore), the Transport claims the
// operation's key from the Store before the first attempt. On first sight
// it mints and persists the key. So a process that restarts after a crash
// and repeats the operation sends the same key. Without a Store the name is
// only reported.
func ContextWithOperation(ctx context.Context, op string) context.Context {
	setCtx(opCtxKey)
	return context.WithValue(ctx, opCtxKey, op)
}

// operationFromContext returns the name set with ContextWithOperation.
func operationFromContext(ctx context.Context) (op string, ok bool) {
	if ctxKinds.Load()&(1<<opCtxKey) != 0 {
		op, ok = ctx.Value(opCtxKey).(string)
	}
	return
}

// ContextWithReport returns a copy of ctx that makes the Transport fill r.
func ContextWithReport(ctx context.Context, r *Report) context.Context {
	setCtx(reportCtxKey)
	return context.WithValue(ctx, reportCtxKey, r)
}

// reportFromContext returns the report set with ContextWithReport, if any.
func reportFromContext(ctx context.Context) (r *Report) {
	if ctxKinds.Load()&(1<<reportCtxKey) != 0 {
		r, _ = ctx.Value(reportCtxKey).(*Report)
	}
	return
}

// ContextWithOuterRetries returns a copy of ctx that declares whether a
// request made with it comes from a loop that retries it on its own. It
// overrides WithOuterRetries' setting for the request. With true, the call
// sends one attempt and the loop drives. With false, the Transport retries
// and looks for no loop.
func ContextWithOuterRetries(ctx context.Context, will bool) context.Context {
	if !outerContexts.Load() {
		outerContexts.Store(true)
	}
	m := outerNever
	if will {
		m = outerAlways
	}
	return context.WithValue(ctx, outerCtxKey, m)
}

// ctxKinds has the bit 1<<k of each ctxKey k that a ContextWith function
// has put in a context in this process. Until then no request's context
// is searched for that value. A search walks the context's chain, layer
// by layer, and most programs set none or one of the four. A context made
// in one goroutine reaches a request in another only through something
// that orders the two, so the request sees the bit set before the value.
var ctxKinds atomic.Uint32

// setCtx records that a context carries a value under k.
func setCtx(k ctxKey) {
	if bit := uint32(1) << k; ctxKinds.Load()&bit == 0 {
		ctxKinds.Or(bit)
	}
}

// outerContexts is set once ContextWithOuterRetries has been called: until
// then no request's context is searched for it.
var outerContexts atomic.Bool

// outerFromContext returns the setting of ContextWithOuterRetries.
func outerFromContext(ctx context.Context) (outerMode, bool) {
	m, ok := ctx.Value(outerCtxKey).(outerMode)
	return m, ok
}
