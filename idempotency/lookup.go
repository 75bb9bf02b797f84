package idempotency

import (
	"context"
	"time"
)

// Record is a scope's record as a Looker reads it, without claiming it:
// for operators and tests.
type Record struct {
	// State is Busy while a claim holds the scope, Replay while a stored
	// answer is live, and 0 when the scope holds neither (no record, an
	// expired one, or a claim whose lease ended).
	State State
	// Expired is true when a stored answer was found past its expiry.
	Expired bool
	// Fingerprint is the stored answer's (State Replay, or Expired), or
	// the claim's (State Busy) where the store keeps it (not Postgres).
	Fingerprint Fingerprint
	// Response is the stored answer (State Replay, or Expired).
	Response *Response
	// Expires is when the stored answer expires (State Replay, or
	// Expired); Lease is when the claim passes on unless renewed (State
	// Busy; zero for Postgres, whose claim is a transaction).
	Expires, Lease time.Time
}

// Looker is a Store that can read a record without claiming it. Every
// store of this module and its sub-modules is one.
type Looker interface {
	// Lookup reads the record of s as it stands at now. It never claims,
	// renews or changes it.
	Lookup(ctx context.Context, s Scope, now time.Time) (Record, error)
}

var _ Looker = (*MemoryStore)(nil)

// Lookup implements Looker. It returns an error only if ctx is done.
func (m *MemoryStore) Lookup(ctx context.Context, s Scope, now time.Time) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[s]
	switch {
	case !ok:
		return Record{}, nil
	case r.resp == nil && now.Before(r.lease):
		return Record{State: Busy, Fingerprint: r.fp, Lease: r.lease}, nil
	case r.resp == nil:
		return Record{Fingerprint: r.fp, Lease: r.lease}, nil
	}
	rec := Record{State: Replay, Fingerprint: r.fp, Response: r.resp, Expires: r.expires}
	if !now.Before(r.expires) {
		rec.State, rec.Expired = 0, true
	}
	return rec, nil
}
