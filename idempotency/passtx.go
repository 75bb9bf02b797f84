package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// TxStore is a Store whose handlers write their effects in its
// transaction (package postgres). The middleware runs each request it
// passes to the handler without a record (a safe method, or no key) in a
// transaction of the store's too, so that the handler always has one.
type TxStore interface {
	Store
	// BeginTx opens a transaction that stores no record. The store may
	// begin it at the handler's first use, so that a handler that does
	// not use it does not need the store.
	BeginTx(ctx context.Context) (Tx, error)
}

// Tx is a TxStore's transaction for a request without a record.
type Tx interface {
	// Context returns ctx carrying the transaction, as Claim.Context.
	Context(ctx context.Context) context.Context
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// errTxEnded is what a handler's writes return after its transaction
// failed to commit: the middleware answered 500 instead.
var errTxEnded = errors.New("idempotency: the transaction did not commit; the answer was replaced by a 500")

// pass runs h on a request without a record: in a transaction of the
// store when it is a TxStore, with a context that ends when the caller's
// time budget does (due, unless zero). The transaction commits when the handler
// writes its status (or returns without writing), before the status is
// sent; a 5xx or a panic rolls it back.
func (m *Middleware) pass(w http.ResponseWriter, r *http.Request, h http.Handler, due time.Time) {
	if !due.IsZero() { // the caller's time budget ends the handler's context
		ctx, cancel := context.WithDeadline(r.Context(), due)
		defer cancel()
		r = r.WithContext(ctx)
	}
	ts, ok := m.store.(TxStore)
	if !ok {
		h.ServeHTTP(w, r)
		return
	}
	s := Scope{Route: r.Method + " " + m.cfg.Route(r)}
	tx, err := ts.BeginTx(r.Context())
	if err != nil {
		m.event(r.Context(), slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		writeResponse(w, problemUnavailable(m.cfg.RetryAfter), "")
		return
	}
	tw := &txWriter{ResponseWriter: w, m: m, tx: tx, ctx: r.Context(), s: s}
	defer func() {
		if v := recover(); v != nil {
			tw.end(http.StatusInternalServerError)
			panic(v)
		}
	}()
	h.ServeHTTP(tw, r.WithContext(tx.Context(r.Context())))
	tw.end(http.StatusOK) // the implicit 200 of a handler that wrote nothing
}

// txWriter ends its transaction when the handler writes its status.
type txWriter struct {
	http.ResponseWriter
	m      *Middleware
	tx     Tx
	ctx    context.Context
	s      Scope
	ended  bool
	failed bool // the commit failed: the 500 is written, the handler's answer dropped
}

// end commits the transaction, or rolls it back for a 5xx, once. A failed
// commit answers 500.
func (t *txWriter) end(status int) {
	if t.ended {
		return
	}
	t.ended = true
	ctx, cancel := settleContext(t.ctx)
	defer cancel()
	if status >= 500 {
		if err := t.tx.Rollback(ctx); err != nil {
			t.m.event(t.ctx, slog.LevelWarn, "store_error", t.s, slog.String("error", err.Error()))
		}
		return
	}
	if err := t.tx.Commit(ctx); err != nil {
		t.m.event(t.ctx, slog.LevelWarn, "store_error", t.s, slog.String("error", err.Error()))
		t.failed = true
		writeResponse(t.ResponseWriter, problemFailed("the transaction could not commit; nothing was done: retry"), "")
	}
}

func (t *txWriter) WriteHeader(code int) {
	if code >= 200 {
		t.end(code)
	}
	if !t.failed {
		t.ResponseWriter.WriteHeader(code)
	}
}

func (t *txWriter) Write(p []byte) (int, error) {
	t.end(http.StatusOK)
	if t.failed {
		return 0, errTxEnded
	}
	return t.ResponseWriter.Write(p)
}

// Flush commits (a flushed answer is sent) and flushes.
func (t *txWriter) Flush() {
	t.end(http.StatusOK)
	if !t.failed {
		_ = http.NewResponseController(t.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (t *txWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
