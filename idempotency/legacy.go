package idempotency

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync"
	"time"
)

// Scope version 1 (the versions before the principal was kept in the
// record) scoped a key by principal, route and key. Version 2 scopes it
// by route and key only, so that a retry with a rotated credential finds
// the record (and is refused, never run again), and keeps the principal in
// the record. A record of version 1 whose principal was empty has the
// scope of version 2; one whose principal was not is found by a lookup
// under its version 1 scope, made before the claim while version 1
// records may live.
//
// How long that is, the store says: the first middleware of version 2 on
// a store records when it started (a record of its own, legacyMarker), and
// every middleware looks version 1 records up until that time plus twice
// its TTL (a rollout shorter than a TTL included). A MemoryStore never
// holds records of an older version: it does not outlive its process.

// legacyMarker is the record that says since when a store is used by
// scope version 2.
var legacyMarker = Scope{Route: "IDEMPOTENCY scope-version", Key: "2"}

// legacyRetry is how soon the marker is read again after it could not be.
const legacyRetry = time.Second

// legacy says whether to look records of scope version 1 up.
type legacy struct {
	mu      sync.Mutex
	until   time.Time // the end of the lookups, once known
	known   bool
	reading bool      // a request reads the marker
	next    time.Time // when to read the marker again, while unknown
}

// legacyOn reports whether records of version 1 may still live at now;
// one request reads (or writes) the store's marker while the others look
// records up without waiting for it.
func (m *Middleware) legacyOn(ctx context.Context, now time.Time) bool {
	if _, ok := m.store.(*MemoryStore); ok {
		return false
	}
	l := &m.scope.legacy
	l.mu.Lock()
	if l.known || l.reading || now.Before(l.next) {
		on := !l.known || now.Before(l.until)
		l.mu.Unlock()
		return on
	}
	l.reading = true
	l.mu.Unlock()
	since, ok := m.readMarker(ctx, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reading = false
	if ok {
		l.until, l.known = since.Add(2*m.cfg.TTL), true
	} else {
		l.next = now.Add(legacyRetry)
	}
	return !l.known || now.Before(l.until)
}

// readMarker returns when version 2 started on the store, recording now
// if no middleware did before.
func (m *Middleware) readMarker(ctx context.Context, now time.Time) (time.Time, bool) {
	var fp Fingerprint
	b, err := m.store.Begin(ctx, legacyMarker, fp, now, now.Add(m.cfg.Lease))
	if err != nil {
		return time.Time{}, false
	}
	switch b.State {
	case Replay:
		t, err := time.Parse(time.RFC3339Nano, string(b.Response.Body))
		return t, err == nil
	case Claimed:
		body := []byte(now.UTC().Format(time.RFC3339Nano))
		if err := b.Claim.Complete(ctx, &Response{Status: 200, Body: body}, now.AddDate(100, 0, 0)); err != nil {
			return time.Time{}, false
		}
		return now, true
	}
	return time.Time{}, false
}

// legacyLookup looks up the version 1 scope of s for c. It returns the
// answer to send when a version 1 record (or its run) decides the
// request; nil when none does and the request goes on under s.
func (m *Middleware) legacyLookup(ctx context.Context, s Scope, c caller, fp [sha256.Size]byte, now, lease time.Time) (*Response, string) {
	if c.v1 == "" || !m.legacyOn(ctx, now) {
		return nil, ""
	}
	old := Scope{Principal: c.v1, Route: s.Route, Key: s.Key}
	b, err := m.store.Begin(ctx, old, fp, now, lease)
	if err != nil {
		m.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		return problemUnavailable(m.cfg.RetryAfter), ""
	}
	switch b.State {
	case Replay:
		m.event(ctx, slog.LevelDebug, "replayed", s)
		return b.Response, StatusReplayed
	case Busy:
		m.event(ctx, slog.LevelDebug, "in_progress", s)
		return problemInProgress(m.cfg.KeyHeader, m.cfg.RetryAfter), ""
	case Mismatch:
		m.event(ctx, slog.LevelInfo, "mismatch", s)
		return problemMismatch(m.cfg.KeyHeader, m.cfg.MismatchStatus), ""
	}
	if err := b.Claim.Release(context.WithoutCancel(ctx)); err != nil {
		m.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
	}
	return nil, ""
}
