package idempotency

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Stats counts the middleware's (or an Inbox's) decisions since it was
// created.
type Stats struct {
	Stored     int64 // answers stored (first runs)
	Replayed   int64 // stored answers replayed
	InProgress int64 // requests refused with 409 while the key ran
	Mismatch   int64 // requests refused with 422: key reused with another payload or principal
	Expired    int64 // expired records found and replaced
	Released   int64 // runs whose answer was not stored
	StoreError int64 // failed store calls
	DeadLetter int64 // Inbox.Do calls refused with ErrDeadLetter
}

// counters are the atomic counts behind Stats, by event name.
type counters struct {
	stored, replayed, inProgress, mismatch, expired, released, storeError, deadLetter atomic.Int64
}

func (c *counters) add(event string) {
	switch event {
	case "stored":
		c.stored.Add(1)
	case "replayed":
		c.replayed.Add(1)
	case "in_progress":
		c.inProgress.Add(1)
	case "mismatch", "principal_mismatch":
		c.mismatch.Add(1)
	case "expired":
		c.expired.Add(1)
	case "released":
		c.released.Add(1)
	case "store_error":
		c.storeError.Add(1)
	case "dead_letter":
		c.deadLetter.Add(1)
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		Stored: c.stored.Load(), Replayed: c.replayed.Load(), InProgress: c.inProgress.Load(),
		Mismatch: c.mismatch.Load(), Expired: c.expired.Load(), Released: c.released.Load(),
		StoreError: c.storeError.Load(), DeadLetter: c.deadLetter.Load(),
	}
}

// Stats returns the middleware's counts.
func (m *Middleware) Stats() Stats { return m.stats.snapshot() }

// event counts event and logs it with the scope's route and key (never
// the principal, which may be a credential before it is hashed; the hash
// is not logged either).
func (m *Middleware) event(ctx context.Context, level slog.Level, event string, s Scope, attrs ...slog.Attr) {
	m.stats.add(event)
	logEvent(ctx, m.cfg.Logger, level, event, s, attrs)
}

func logEvent(ctx context.Context, l *slog.Logger, level slog.Level, event string, s Scope, attrs []slog.Attr) {
	if !l.Enabled(ctx, level) {
		return
	}
	attrs = append(attrs, slog.String("route", s.Route), slog.String("key", s.Key))
	l.LogAttrs(ctx, level, "idempotency: "+event, attrs...)
}
