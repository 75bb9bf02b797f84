package idempotency

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"
)

// MemoryStore is a Store in the memory of one process, for a single
// instance and for tests. It is not atomic with the operation's effects:
// a claim whose handler answered 5xx or panicked is stored anyway (see
// Config), since the handler may have acted.
//
// A claim holds its scope until its lease (the handler's deadline); a
// claim still held after it is taken over by the next request, so an
// operation that died is run again, never twice at once. Expired records
// are ignored; Sweep deletes them. The zero value is not usable: call
// NewMemoryStore. Safe for concurrent use by multiple goroutines.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[[sha256.Size]byte]*memRecord // guarded by mu
	gen  uint64                           // guarded by mu; numbers claims
}

type memRecord struct {
	fp      Fingerprint
	gen     uint64    // the claim holding it, while resp is nil
	lease   time.Time // while resp is nil
	resp    *Response // nil while in progress
	expires time.Time // once completed
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{recs: make(map[[sha256.Size]byte]*memRecord)}
}

// Atomic returns false: the store cannot undo an operation's effects.
func (m *MemoryStore) Atomic() bool { return false }

// Begin implements Store. It returns an error only if ctx is done.
func (m *MemoryStore) Begin(ctx context.Context, s Scope, fp Fingerprint, now, lease time.Time) (Begun, error) {
	if err := ctx.Err(); err != nil {
		return Begun{}, fmt.Errorf("idempotency: memory store: %w", err)
	}
	h := s.Hash()
	m.mu.Lock()
	defer m.mu.Unlock()
	expired := false
	if r, ok := m.recs[h]; ok {
		switch {
		case r.resp == nil && now.Before(r.lease):
			return Begun{State: Busy}, nil
		case r.resp == nil:
			// The lease ran out: the claim is taken over below.
		case !now.Before(r.expires):
			expired = true
		case r.fp != fp:
			return Begun{State: Mismatch}, nil
		default:
			return Begun{State: Replay, Response: r.resp}, nil
		}
	}
	m.gen++
	m.recs[h] = &memRecord{fp: fp, gen: m.gen, lease: lease}
	return Begun{State: Claimed, Claim: &memClaim{m: m, h: h, gen: m.gen}, Expired: expired}, nil
}

// Sweep implements Store: it deletes the completed records expired at now.
func (m *MemoryStore) Sweep(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("idempotency: memory store: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for h, r := range m.recs {
		if r.resp != nil && !now.Before(r.expires) {
			delete(m.recs, h)
			n++
		}
	}
	return n, nil
}

// Len returns the number of records, in progress or completed, expired
// or not.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// memClaim is a MemoryStore claim: the record of h while it holds gen.
type memClaim struct {
	m   *MemoryStore
	h   [sha256.Size]byte
	gen uint64
}

func (c *memClaim) Context(ctx context.Context) context.Context { return ctx }

func (c *memClaim) Complete(_ context.Context, resp *Response, expires time.Time) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	r, ok := c.m.recs[c.h]
	if !ok || r.resp != nil || r.gen != c.gen {
		return ErrClaimEnded
	}
	r.resp, r.expires = resp, expires
	return nil
}

func (c *memClaim) Release(context.Context) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	r, ok := c.m.recs[c.h]
	if !ok || r.resp != nil || r.gen != c.gen {
		return ErrClaimEnded
	}
	delete(c.m.recs, c.h)
	return nil
}
