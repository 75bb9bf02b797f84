package idempotency

import (
	"context"
	"sort"
	"time"
)

// memFailure is the failed runs of a MemoryStore scope (Failer).
type memFailure struct {
	s       Scope
	count   int
	lastErr string
	at      time.Time
	expires time.Time
	dead    bool
}

var (
	_ Failer          = (*memClaim)(nil)
	_ DeadLetterStore = (*MemoryStore)(nil)
)

// Failures implements Failer.
func (c *memClaim) Failures(_ context.Context, now time.Time) (int, bool, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	r, held := c.m.recs[c.h]
	if !held || r.resp != nil || r.gen != c.gen {
		return 0, false, ErrClaimEnded
	}
	f, ok := c.m.failed[c.h]
	if !ok || !now.Before(f.expires) {
		return 0, false, nil
	}
	return f.count, f.dead, nil
}

// Fail implements Failer: it releases the claim and counts the failed
// run, in one step.
func (c *memClaim) Fail(_ context.Context, run FailedRun) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if err := c.release(); err != nil {
		return err
	}
	if c.m.failed == nil {
		c.m.failed = make(map[Scope]*memFailure)
	}
	f, ok := c.m.failed[c.h]
	if !ok || !run.At.Before(f.expires) {
		f = &memFailure{s: c.s}
		c.m.failed[c.h] = f
	}
	f.count++
	f.lastErr, f.at, f.expires = run.Error, run.At, run.Expires
	f.dead = run.Max > 0 && f.count >= run.Max
	return nil
}

// DeadLetters implements DeadLetterStore, oldest failure first.
func (m *MemoryStore) DeadLetters(ctx context.Context, route string, now time.Time, limit int) ([]DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DeadLetter
	for _, f := range m.failed {
		if f.dead && f.s.Route == route && now.Before(f.expires) {
			out = append(out, DeadLetter{Key: f.s.Key, Failures: f.count, LastError: f.lastErr, Failed: f.at, Expires: f.expires})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Failed.Before(out[j].Failed) })
	if len(out) > limit {
		out = out[:max(limit, 0)]
	}
	return out, nil
}

// ReleaseDeadLetter implements DeadLetterStore.
func (m *MemoryStore) ReleaseDeadLetter(ctx context.Context, s Scope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failed, s)
	return nil
}

// sweepFailed deletes the failures expired at now. It requires m.mu held.
func (m *MemoryStore) sweepFailed(now time.Time) {
	for h, f := range m.failed {
		if !now.Before(f.expires) {
			delete(m.failed, h)
		}
	}
}
