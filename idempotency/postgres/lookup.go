package postgres

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/resilienthttp/resilient/idempotency"
)

var _ idempotency.Looker = (*Store)(nil)

// Lookup implements idempotency.Looker: it reads whether a transaction
// holds the scope's lock (pg_locks) and the scope's committed record,
// taking no lock. A scope is Busy while a claim's transaction holds its
// lock; the claim's fingerprint and lease are not kept (Record.Lease is
// zero).
func (s *Store) Lookup(ctx context.Context, sc idempotency.Scope, now time.Time) (idempotency.Record, error) {
	h := sc.Hash()
	held, rec, err := s.db.lookup(ctx, s.q, int64(binary.BigEndian.Uint64(h[:8])^s.salt), h[:])
	if err != nil {
		return idempotency.Record{}, s.explain("lookup", err)
	}
	if held {
		return idempotency.Record{State: idempotency.Busy}, nil
	}
	if rec == nil {
		return idempotency.Record{}, nil
	}
	out := idempotency.Record{State: idempotency.Replay, Fingerprint: rec.fp, Response: rec.resp, Expires: rec.expires}
	if !now.Before(rec.expires) {
		out.State, out.Expired = 0, true
	}
	return out, nil
}
