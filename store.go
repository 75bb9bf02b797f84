package resilient

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient/persist"
)

// KeyTime returns the creation time embedded in a UUIDv7 key, and false for
// a key that is not a UUIDv7.
func KeyTime(key string) (time.Time, bool) {
	u, err := uuid.Parse(key)
	if err != nil || u.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}

// claim gets the operation's key from the Store before anything is sent:
// the stored key if the operation was claimed before (by this process or one
// that crashed), else the key chosen by identity, now made durable.
func (c *call) claim() error {
	cfg := &c.t.cfg
	fp, err := c.body.fingerprint(c.req)
	if err != nil {
		return c.fail(ErrBodyNotReplayable, CategoryClient, err)
	}
	now := cfg.now()
	candidate := persist.Record{Operation: c.op, Key: c.key, Fingerprint: fp, Created: now, State: persist.Pending}
	rec, claimed, err := cfg.store.Claim(c.ctx, candidate)
	if err != nil {
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			return c.fail(ctxErr, CategoryCanceled, err)
		}
		return c.fail(ErrStore, CategoryClient, fmt.Errorf("claim %q: %w", c.op, err))
	}
	if claimed {
		return nil
	}
	if rec.Fingerprint != fp {
		return c.fail(ErrOperationMismatch, CategoryClient, fmt.Errorf("operation %q", c.op))
	}
	explicit := c.req.Header.Get(cfg.keyHeader) != ""
	if _, ok := KeyFromContext(c.ctx); ok {
		explicit = true
	}
	if explicit && rec.Key != c.key {
		return c.fail(ErrOperationMismatch, CategoryClient, fmt.Errorf("operation %q was claimed with another key", c.op))
	}
	c.key = rec.Key
	if rec.State == persist.Pending && cfg.keyRetention > 0 {
		born := rec.Created
		if t, ok := KeyTime(rec.Key); ok && t.Before(born) {
			born = t
		}
		if age := now.Sub(born); age > cfg.keyRetention {
			return c.fail(ErrKeyExpired, CategoryClient, fmt.Errorf("operation %q: key is %s old, retention %s", c.op, age.Round(time.Second), cfg.keyRetention))
		}
	}
	return nil
}
