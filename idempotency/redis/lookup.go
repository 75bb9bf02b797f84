package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/resilienthttp/resilient/idempotency"
)

var _ idempotency.Looker = (*Store)(nil)

// Lookup implements idempotency.Looker: one HMGET, which claims, renews
// and changes nothing.
func (s *Store) Lookup(ctx context.Context, sc idempotency.Scope, now time.Time) (idempotency.Record, error) {
	h := sc.Hash()
	v, err := s.client.HMGet(ctx, s.prefix+hex.EncodeToString(h[:]), "st", "fp", "lease", "exp", "status", "hdr", "body").Result()
	if err != nil {
		return idempotency.Record{}, wrap(ctx, "lookup", err)
	}
	st, _ := v[0].(string)
	var rec idempotency.Record
	if st == "" {
		return rec, nil
	}
	fp, _ := v[1].(string)
	if b, err := hex.DecodeString(fp); err != nil || copy(rec.Fingerprint[:], b) != len(rec.Fingerprint) {
		return idempotency.Record{}, fmt.Errorf("idempotency/redis: lookup: %w: fingerprint %q", ErrCorrupt, fp)
	}
	if st == "p" {
		lease, err := micros(v[2])
		if err != nil {
			return idempotency.Record{}, err
		}
		rec.Lease = lease
		if now.Before(lease) {
			rec.State = idempotency.Busy
		}
		return rec, nil
	}
	exp, err := micros(v[3])
	if err != nil {
		return idempotency.Record{}, err
	}
	resp, err := decodeResponse(v[4], v[5], v[6])
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("idempotency/redis: lookup: %w", err)
	}
	rec.Response, rec.Expires = resp, exp
	if now.Before(exp) {
		rec.State = idempotency.Replay
	} else {
		rec.Expired = true
	}
	return rec, nil
}

// micros decodes a time stored in Unix µs.
func micros(v any) (time.Time, error) {
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("idempotency/redis: lookup: %w: time %v", ErrCorrupt, v)
	}
	return time.UnixMicro(n), nil
}
