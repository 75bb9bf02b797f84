package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// Inbox runs a function once per key, for consumers of webhooks and queue
// messages: the key is the message's id (Standard Webhooks' webhook-id,
// Stripe's event id, a queue message id). A duplicate gets the first run's
// result without running the function again. Its fields are read at each
// call; set them before the first. Safe for concurrent use by multiple
// goroutines.
type Inbox struct {
	// Store keeps the records; required.
	Store Store
	// Name scopes the keys (several inboxes may share a store). Default
	// "inbox".
	Name string
	// TTL is how long a result is kept. Default 24 h.
	TTL time.Duration
	// Lease bounds a run when ctx has no deadline. The claim is renewed
	// every third of it while fn runs, and passes on to another call only
	// when its owner missed three renewals (see Config.Lease). Default
	// 1 min.
	Lease time.Duration
	// Logger receives one event per decision. Default slog.Default() (see
	// Config.Logger).
	Logger *slog.Logger
	// MaxFailures is how many failed runs (fn returned an error or
	// panicked) make a message a dead letter: Do then returns
	// ErrDeadLetter without running fn, until the failures expire (TTL
	// after the last one) or an operator calls ReleaseDeadLetter. The
	// count is kept by the store, with the last error (see Failer).
	// Default DefaultMaxFailures (5); a negative value never makes one.
	MaxFailures int

	stats     counters
	noRenewal atomic.Bool // the no_renewal event was logged
	noFailer  atomic.Bool // the no_dead_letters event was logged
}

// Do runs fn once for key, with a context that carries the store's
// transaction (for an atomic store), and stores its result. A later call
// with key returns the stored result and replayed true, without running
// fn. payload is compared with the first call's as the middleware
// compares a JSON body: a payload that parses as one JSON value by its
// canonical JSON (keys sorted, no insignificant space, numbers
// normalised), any other byte for byte; nil is empty. Another payload is
// ErrMismatch, which detects a tampered or reused id.
//
// If fn returns an error (or panics), nothing is stored and the error is
// returned (the panic goes on): the next delivery runs fn again, until
// the message failed MaxFailures times: then it is a dead letter, and Do
// returns ErrDeadLetter without running fn (see DeadLetters and
// ReleaseDeadLetter). The store keeps fn's error text with the count:
// keep secrets out of it. With a store that is not atomic
// (MemoryStore), fn must therefore return an error only when it did
// nothing. While another call runs key, Do returns ErrInProgress (the
// message should be redelivered later). Other errors come from the store.
func (in *Inbox) Do(ctx context.Context, key string, payload []byte, fn func(ctx context.Context) ([]byte, error)) (result []byte, replayed bool, err error) {
	if in.Store == nil {
		return nil, false, errors.New("idempotency: Inbox.Do: nil Store")
	}
	if key == "" || len(key) > MaxKeyLength {
		return nil, false, fmt.Errorf("idempotency: Inbox.Do: key of %d bytes: want 1 to %d", len(key), MaxKeyLength)
	}
	s := in.scope(key)
	now := time.Now()
	ttl := orDefault(in.Lease, DefaultLease)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(ttl)
	}
	fp, raw := inboxFingerprint(payload)
	b, err := in.Store.Begin(ctx, s, fp, now, now.Add(ttl))
	if err == nil && b.State == Mismatch && fp != raw {
		// A record of fingerprint version 1 kept the payload's bytes.
		b, err = in.Store.Begin(ctx, s, raw, now, now.Add(ttl))
	}
	if err != nil {
		in.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		return nil, false, fmt.Errorf("idempotency: inbox %s: %w", s.Route[len("INBOX "):], err)
	}
	if b.Expired {
		in.event(ctx, slog.LevelDebug, "expired", s)
	}
	switch b.State {
	case Replay:
		in.event(ctx, slog.LevelDebug, "replayed", s)
		return b.Response.Body, true, nil
	case Busy:
		in.event(ctx, slog.LevelDebug, "in_progress", s)
		return nil, false, ErrInProgress
	case Mismatch:
		in.event(ctx, slog.LevelInfo, "mismatch", s)
		return nil, false, ErrMismatch
	}
	if in.deadLetter(ctx, s, b.Claim) {
		return nil, false, ErrDeadLetter
	}
	return in.run(ctx, s, b.Claim, deadline, fn)
}

// scope returns the scope of key in the inbox.
func (in *Inbox) scope(key string) Scope {
	name := in.Name
	if name == "" {
		name = "inbox"
	}
	return Scope{Route: "INBOX " + name, Key: key}
}

// run runs fn under claim c and settles it.
func (in *Inbox) run(ctx context.Context, s Scope, c Claim, deadline time.Time, fn func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	fctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	fctx = c.Context(fctx)
	sctx, scancel := settleContext(fctx)
	defer scancel()
	stop := keepClaim(c, in.Store, orDefault(in.Lease, DefaultLease), time.Now, &in.noRenewal, func(level slog.Level, event string, attrs ...slog.Attr) {
		in.event(ctx, level, event, s, attrs...)
	})
	settled := false
	defer func() {
		if !settled { // fn panicked: nothing is stored, a failure counted; the panic goes on
			stop()
			in.fail(sctx, s, c, "fn panicked")
		}
	}()
	res, err := fn(fctx)
	settled = true
	stop()
	if err != nil {
		in.fail(sctx, s, c, err.Error())
		in.event(ctx, slog.LevelDebug, "released", s)
		return nil, false, err
	}
	if err := c.Complete(sctx, &Response{Status: 200, Body: res}, time.Now().Add(orDefault(in.TTL, DefaultTTL))); err != nil {
		in.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		return nil, false, fmt.Errorf("idempotency: inbox: store the result: %w", err)
	}
	in.event(ctx, slog.LevelDebug, "stored", s)
	return res, false, nil
}

// inboxFingerprint returns the fingerprint of payload: SHA-256 of its
// canonical JSON when it parses, else of its bytes; and raw, SHA-256 of
// its bytes, which fingerprint version 1 compared.
func inboxFingerprint(payload []byte) (fp, raw Fingerprint) {
	raw = sha256.Sum256(payload)
	if canon, err := appendCanonical(nil, payload); err == nil {
		return sha256.Sum256(canon), raw
	}
	return raw, raw
}

// Stats returns the inbox's counts (InProgress counts ErrInProgress,
// Mismatch ErrMismatch).
func (in *Inbox) Stats() Stats { return in.stats.snapshot() }

func (in *Inbox) event(ctx context.Context, level slog.Level, event string, s Scope, attrs ...slog.Attr) {
	in.stats.add(event)
	l := in.Logger
	if l == nil {
		l = slog.Default()
	}
	logEvent(ctx, l, level, event, s, attrs)
}
