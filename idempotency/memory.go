package idempotency

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryStore is a Store in the memory of one process, for a single
// instance and for tests. It is not atomic with the operation's effects:
// a claim whose handler answered 5xx or panicked is stored anyway (see
// Config), since the handler may have acted.
//
// A claim holds its scope while its owner renews it (every third of the
// lease, while the handler runs); a claim not renewed for a whole lease
// is taken over by the next request, so an operation whose owner stopped
// is run again. In one process the owner stops only with the process
// (when the records die with it), or when its renewing goroutine does not
// run for a whole lease (three renewals): then, and only then, two runs
// may be at once. Expired records
// are ignored; Sweep deletes them. The zero value is not usable: call
// NewMemoryStore. Safe for concurrent use by multiple goroutines.
type MemoryStore struct {
	mu            sync.Mutex
	recs          map[Scope]*memRecord // guarded by mu; keyed by the scope itself, which costs no hash
	gen           uint64               // guarded by mu; numbers claims
	fifo          []memEntry           // guarded by mu; claims in order, some stale (MaxRecords only)
	head          int                  // guarded by mu; fifo[head] is the oldest entry
	maxRecords    int                  // 0: unbounded
	mismatchFirst bool
	failed        map[Scope]*memFailure // guarded by mu; Inbox.Do's failed runs (memdead.go)
}

// memEntry names the record of h claimed as gen, in MemoryStore.fifo.
type memEntry struct {
	h   Scope
	gen uint64
}

// MemoryOption configures NewMemoryStore.
type MemoryOption func(*MemoryStore)

// MaxRecords bounds a MemoryStore to n records. Begin drops the oldest
// records once expired; a new claim that finds the store full drops the
// oldest completed records. A record in progress is never dropped: that would let its
// operation run twice. Default: unbounded (n ≤ 0).
func MaxRecords(n int) MemoryOption {
	return func(m *MemoryStore) { m.maxRecords = max(n, 0) }
}

// MismatchFirst makes Begin answer Mismatch, not Busy, for a scope in
// progress with another fingerprint: the client learns at once that its
// payload is wrong, instead of after the run. Default: Busy first.
func MismatchFirst() MemoryOption {
	return func(m *MemoryStore) { m.mismatchFirst = true }
}

type memRecord struct {
	fp      Fingerprint
	gen     uint64    // the claim holding it, while resp is nil
	lease   time.Time // while resp is nil
	resp    *Response // nil while in progress
	expires time.Time // once completed
}

// NewMemoryStore returns an empty MemoryStore configured by opts.
func NewMemoryStore(opts ...MemoryOption) *MemoryStore {
	m := &MemoryStore{recs: make(map[Scope]*memRecord)}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Atomic returns false: the store cannot undo an operation's effects.
func (m *MemoryStore) Atomic() bool { return false }

// Begin implements Store. It returns an error only if ctx is done.
func (m *MemoryStore) Begin(ctx context.Context, s Scope, fp Fingerprint, now, lease time.Time) (Begun, error) {
	if err := ctx.Err(); err != nil {
		return Begun{}, fmt.Errorf("idempotency: memory store: %w", err)
	}
	h := s
	m.mu.Lock()
	defer m.mu.Unlock()
	expired := false
	if m.maxRecords > 0 {
		m.dropExpired(now)
	}
	if r, ok := m.recs[h]; ok {
		switch {
		case m.mismatchFirst && r.fp != fp && (r.resp != nil && now.Before(r.expires) || r.resp == nil && now.Before(r.lease)):
			return Begun{State: Mismatch}, nil
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
	if m.maxRecords > 0 {
		delete(m.recs, h) // the record replaced (expired, or its lease ran out) makes room first
		m.makeRoom()
	}
	m.gen++
	m.recs[h] = &memRecord{fp: fp, gen: m.gen, lease: lease}
	if m.maxRecords > 0 {
		m.fifo = append(m.fifo, memEntry{h, m.gen})
	}
	return Begun{State: Claimed, Claim: &memClaim{m: m, h: h, gen: m.gen, s: s}, Expired: expired}, nil
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
	m.sweepFailed(now)
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
	h   Scope
	gen uint64
	s   Scope // for dead letters (memdead.go)
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

// Renew moves the claim's lease to lease.
func (c *memClaim) Renew(_ context.Context, lease time.Time) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	r, ok := c.m.recs[c.h]
	if !ok || r.resp != nil || r.gen != c.gen {
		return ErrClaimEnded
	}
	r.lease = lease
	return nil
}

func (c *memClaim) Release(context.Context) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.release()
}

// release deletes c's record if c still holds it (else ErrClaimEnded). It
// requires c.m.mu held.
func (c *memClaim) release() error {
	r, ok := c.m.recs[c.h]
	if !ok || r.resp != nil || r.gen != c.gen {
		return ErrClaimEnded
	}
	delete(c.m.recs, c.h)
	return nil
}

// dropExpired drops the expired records at the old end of the fifo
// (MaxRecords only). It requires m.mu held.
func (m *MemoryStore) dropExpired(now time.Time) {
	for m.head < len(m.fifo) {
		e := m.fifo[m.head]
		if r, ok := m.recs[e.h]; ok && r.gen == e.gen {
			if r.resp == nil || now.Before(r.expires) {
				break
			}
			delete(m.recs, e.h)
		}
		m.pop()
	}
}

// makeRoom drops the oldest completed records while the store is full,
// before a new record is added. It requires m.mu held.
func (m *MemoryStore) makeRoom() {
	for budget := len(m.fifo) - m.head; len(m.recs) >= m.maxRecords && budget > 0; budget-- {
		e := m.fifo[m.head]
		m.pop()
		r, ok := m.recs[e.h]
		switch {
		case !ok || r.gen != e.gen:
			// stale: released, taken over or swept
		case r.resp == nil:
			m.fifo = append(m.fifo, e) // in progress: keep it, look at the next
		default:
			delete(m.recs, e.h)
		}
	}
	// Compact when the consumed prefix or the stale entries dominate.
	if live := len(m.fifo) - m.head; m.head > 1024 && m.head > live || live > 2*len(m.recs)+1024 {
		kept := make([]memEntry, 0, len(m.recs)+1)
		for _, e := range m.fifo[m.head:] {
			if r, ok := m.recs[e.h]; ok && r.gen == e.gen {
				kept = append(kept, e)
			}
		}
		m.fifo, m.head = kept, 0
	}
}

// pop drops the oldest fifo entry. It requires m.mu held.
func (m *MemoryStore) pop() {
	m.fifo[m.head] = memEntry{}
	m.head++
}
