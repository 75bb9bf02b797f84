package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
)

// Values of the Idempotency-Status response header, which the resilient
// client counts as evidence that the server dedupes by key.
const (
	StatusStored   = "stored"
	StatusReplayed = "replayed"
)

// Middleware makes the unsafe requests of the handlers it wraps
// idempotent by key. Create it with New. Safe for concurrent use by
// multiple goroutines.
type Middleware struct {
	store Store
	cfg   Config
	stats counters
	scope scopeState
	renew renewTicker
}

// New returns a Middleware over store, or an error if store is nil.
//
// For each request with a key and an unsafe method (not GET, HEAD,
// OPTIONS or TRACE) it reads the body, computes the scope and the
// fingerprint, and claims the scope in the store. A claimed request runs
// the handler once, buffered, and stores its answer (status, the headers
// of Config.Headers, body) with Idempotency-Status: stored. A later
// request with the scope gets that answer byte for byte with
// Idempotency-Status: replayed; one with another fingerprint gets 422 (Config.MismatchStatus);
// one that arrives while the first runs gets 409 with Retry-After. Every
// answer of the middleware's own is an RFC 9457 problem, unstored and
// without Idempotency-Status. A body that cannot be read whole runs
// nothing and stores nothing: 413 when a size limit fired (MaxBody or an
// outer http.MaxBytesReader), 408 when the server's read deadline fired,
// else 400 (the client stopped sending).
//
// What is stored when the handler fails depends on the store. An atomic
// store (Store.Atomic) rolls back a 5xx, a panic or an answer larger than
// MaxAnswer with the handler's effects: nothing is stored and a retry runs
// again. A store outside the effect's transaction (MemoryStore) stores
// them, a panic or an oversized answer as a 500 problem, since the handler
// may have acted: a retry gets the same answer, never a second effect.
// With any store, 408, 425, 429 and 503 (the handler says it did not
// handle the request: a server-side budget such as package pushback
// answers 503 or 429) are released, unstored and unmarked; a handler that
// acted must not answer them.
//
// The handler's context is not cancelled when the client goes away: the
// run completes, is stored, and the client's retry gets it. It ends at the
// request's deadline, else after Config.Lease, and no later than the
// caller's time budget (see "Time budget" below). The claim does not end
// with it: while the handler runs, the middleware renews the claim (a
// Renewer, as every store of this module makes) every third of Config.Lease, so a duplicate gets 409 however slow the handler
// is. The claim passes on to another request only when its owner missed
// three renewals in a row: its process died, or was paused for a whole
// Lease (see each store for what that allows). A handler that never
// returns keeps its key busy for the life of its process. The answer is
// stored with a context of its own (values kept, bounded to 10 s), so an
// answer written as the handler's context ends is still stored.
//
// Time budget: a request may say how long its caller waits, in
// milliseconds from its arrival: X-Request-Timeout (the resilient client's
// WithTimeBudgetHeader) or X-Envoy-Expected-Rq-Timeout-Ms (Envoy's), the
// smaller if both. A value that is not a non-negative integer is ignored:
// the request runs as without it. The budget only shortens the handler's
// context, of every request the middleware sees (passed through too); the
// server's bound stays Config.Lease or the request's deadline. A request
// whose budget is spent on arrival (0) or while its body is read gets 408
// (problem budget-spent) at once: the handler does not run and nothing is
// stored; the resilient client takes it for an answer of nothing done. A
// handler whose context ended before it acted should answer 503 or 408,
// so that it is not stored and a retry runs it.
func New(store Store, cfg Config) (*Middleware, error) {
	if store == nil {
		return nil, errors.New("idempotency: New: nil Store")
	}
	if !cfg.Storage.valid() {
		return nil, fmt.Errorf("idempotency: New: unknown Storage %d", cfg.Storage)
	}
	if s := cfg.MismatchStatus; s != 0 && s != http.StatusConflict && s != http.StatusUnprocessableEntity {
		return nil, fmt.Errorf("idempotency: New: MismatchStatus %d: want 409 or 422", s)
	}
	return &Middleware{store: store, cfg: cfg.withDefaults()}, nil
}

// Handler returns h wrapped by the middleware.
func (m *Middleware) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, h) })
}

// serve is the middleware's decision, in order.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	due := budgetDue(r.Header) // zero without a budget
	if spent(due) {
		m.budgetSpent(r.Context(), w, Scope{Route: r.Method + " " + m.cfg.Route(r)})
		return
	}
	if safeMethod(r.Method) {
		m.pass(w, r, h, due)
		return
	}
	key, present, err := parseKey(r.Header, m.cfg.KeyHeader)
	switch {
	case err != nil:
		writeResponse(w, problemInvalidKey(m.cfg.KeyHeader, err), "")
		return
	case !present && m.cfg.RequireKey:
		writeResponse(w, problemMissingKey(m.cfg.KeyHeader), "")
		return
	case !present:
		m.pass(w, r, h, due)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.MaxBody+1))
	if err != nil { // never the implicit 200 of a handler that did not run
		m.event(r.Context(), slog.LevelInfo, "unreadable_body", Scope{Route: r.Method + " " + m.cfg.Route(r), Key: key}, slog.String("error", err.Error()))
		writeResponse(w, problemUnreadable(err), "")
		return
	}
	if int64(len(body)) > m.cfg.MaxBody {
		writeResponse(w, problemTooLarge(m.cfg.MaxBody), "")
		return
	}
	fpb, err := m.cfg.Fingerprint(r, body)
	if err != nil {
		writeResponse(w, problemInvalidBody(err), "")
		return
	}
	s := Scope{Route: r.Method + " " + m.cfg.Route(r), Key: key} // the principal is in the record (principal.go)
	// The body may have taken the rest of the budget.
	if spent(due) {
		m.budgetSpent(r.Context(), w, s)
		return
	}
	who := m.caller(r)
	m.warnCookies(r.Context(), who)
	deadline := m.handlerDeadline(r, due)
	now := m.now()
	lease := now.Add(m.cfg.Lease)
	fp := sha256.Sum256(fpb)
	if resp, mark := m.legacyLookup(r.Context(), s, who, fp, now, lease); resp != nil {
		writeResponse(w, resp, mark)
		return
	}
	b, err := m.store.Begin(r.Context(), s, fp, now, lease)
	if err != nil {
		m.event(r.Context(), slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		writeResponse(w, problemUnavailable(m.cfg.RetryAfter), "")
		return
	}
	if b.Expired {
		m.event(r.Context(), slog.LevelDebug, "expired", s)
	}
	switch b.State {
	case Replay:
		if !who.owns(b.Response) {
			m.event(r.Context(), slog.LevelInfo, "principal_mismatch", s)
			writeResponse(w, problemPrincipalMismatch(m.cfg.KeyHeader, m.cfg.MismatchStatus), "")
			return
		}
		m.event(r.Context(), slog.LevelDebug, "replayed", s, slog.Int("status", b.Response.Status))
		writeResponse(w, b.Response, StatusReplayed)
	case Busy:
		m.event(r.Context(), slog.LevelDebug, "in_progress", s)
		writeResponse(w, problemInProgress(m.cfg.KeyHeader, m.cfg.RetryAfter), "")
	case Mismatch:
		m.event(r.Context(), slog.LevelInfo, "mismatch", s)
		writeResponse(w, problemMismatch(m.cfg.KeyHeader, m.cfg.MismatchStatus), "")
	default:
		m.run(w, r, h, s, ownedClaim{b.Claim, who.tag}, body, deadline)
	}
}

// keep has m.renew renew c while its handler runs, or logs once that the
// store's claims cannot be renewed (nil: nothing to drop).
func (m *Middleware) keep(ctx context.Context, s Scope, c Claim) *claimRenewer {
	r, ok := renewerOf(c)
	if !ok {
		warnNoRenewal(m.store, m.cfg.Lease, &m.scope.noRenewal, func(level slog.Level, event string, attrs ...slog.Attr) {
			m.event(ctx, level, event, s, attrs...)
		})
		return nil
	}
	return m.renew.keep(r, m.cfg.Lease, m.now, func(err error) {
		m.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", "renew: "+err.Error()))
	})
}

// run runs h under claim c and settles the claim: stored or released.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, h http.Handler, s Scope, c Claim, body []byte, deadline time.Time) {
	dl := &lazyDeadline{parent: context.WithoutCancel(r.Context()), deadline: deadline}
	defer dl.end()
	ctx := c.Context(dl)
	hr := r.WithContext(ctx)
	rb := &readBody{}
	rb.Reset(body)
	hr.Body, hr.ContentLength = rb, int64(len(body))
	capt := newCapture(m.cfg.MaxAnswer)
	kept := m.keep(ctx, s, c)
	panicked, pv, stack := invoke(h, capt, hr)
	m.renew.drop(kept)
	if panicked {
		m.event(ctx, slog.LevelError, "panic", s, slog.Any("panic", pv), slog.String("stack", string(stack)))
	}
	sctx := settleDeadline(ctx)
	defer sctx.end()
	resp, mark, own := m.settle(sctx, s, c, capt, panicked)
	if own {
		copyHeader(w.Header(), capt.header) // the first answer keeps every header the handler set
	}
	writeResponse(w, resp, mark)
	if panicked && pv == http.ErrAbortHandler {
		panic(http.ErrAbortHandler) // after settling: the handler asked to abort the answer
	}
}

// settle stores or releases claim c after the handler wrote capt, and
// returns the answer to send, its Idempotency-Status ("" for none) and
// whether it is the handler's own.
func (m *Middleware) settle(ctx context.Context, s Scope, c Claim, capt *capture, panicked bool) (*Response, string, bool) {
	resp := capt.response(m.cfg.Headers)
	failed := panicked || capt.oversize
	if failed {
		resp = problemFailed(failureDetail(panicked, m.cfg.MaxAnswer))
	}
	store := m.cfg.Storage.stores(resp.Status, m.store.Atomic())
	if failed {
		store = !m.store.Atomic() // the handler may have acted and nothing can undo it
	}
	if !store {
		if err := c.Release(ctx); err != nil {
			m.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		}
		m.event(ctx, slog.LevelDebug, "released", s, slog.Int("status", resp.Status))
		return resp, "", !failed
	}
	if err := c.Complete(ctx, resp, m.now().Add(m.cfg.TTL)); err != nil {
		m.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		if m.store.Atomic() {
			return problemFailed("the answer could not be stored; nothing was done: retry"), "", false
		}
		return problemFailed("the answer could not be stored"), "", false
	}
	m.event(ctx, slog.LevelDebug, "stored", s, slog.Int("status", resp.Status))
	return resp, StatusStored, !failed
}

// readBody is the body the handler reads: the one read before the claim.
type readBody struct{ bytes.Reader }

func (*readBody) Close() error { return nil }

// now reads the records' clock, Config.Now.
func (m *Middleware) now() time.Time {
	if m.cfg.Now != nil {
		return m.cfg.Now()
	}
	return time.Now()
}

// invoke calls h, recovering a panic, its value and its stack.
func invoke(h http.Handler, w http.ResponseWriter, r *http.Request) (panicked bool, v any, stack []byte) {
	panicked = true
	defer func() {
		if panicked {
			v, stack = recover(), debug.Stack()
		}
	}()
	h.ServeHTTP(w, r)
	return false, nil, nil
}

func failureDetail(panicked bool, limit int64) string {
	if panicked {
		return "the handler failed"
	}
	return fmt.Sprintf("the answer is larger than %d bytes and cannot be stored", limit)
}

// nothingDone reports whether a status says the request was not acted
// on, so that it must not be stored: 408, 425, 429, 503.
func nothingDone(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true
	}
	return false
}

// safeMethod reports whether RFC 9110 calls method safe.
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

// writeResponse writes resp, with Idempotency-Status: mark unless mark is
// empty, and Content-Length.
func writeResponse(w http.ResponseWriter, resp *Response, mark string) {
	h := w.Header()
	// One copy of every value (the record stays as stored), in one array
	// unless a header has more than one value.
	vals := make([]string, 0, len(resp.Header)+2)
	for k, v := range resp.Header {
		if k == principalHeader {
			continue // kept in the record, never sent
		}
		i := len(vals)
		vals = append(vals, v...)
		h[k] = vals[i:len(vals):len(vals)]
	}
	if mark != "" {
		vals = append(vals, mark)
		h["Idempotency-Status"] = vals[len(vals)-1 : len(vals) : len(vals)]
	} else {
		delete(h, "Idempotency-Status")
	}
	if bodyAllowed(resp.Status) {
		h["Content-Length"] = []string{strconv.Itoa(len(resp.Body))}
	}
	w.WriteHeader(resp.Status)
	if bodyAllowed(resp.Status) {
		_, _ = w.Write(resp.Body)
	}
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}

func problemUnavailable(retryAfter time.Duration) *Response {
	p := problemResponse(http.StatusServiceUnavailable, "unavailable", "Service Unavailable",
		"the idempotency store is unavailable; nothing was done", "")
	p.Header.Set("Retry-After", strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10))
	return p
}
