package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/idempotency"
)

// The failed runs of a scope (idempotency.Failer) are a hash of their own
// beside the record, prefix + "f:" + member: n (the count), err, at and
// exp (Unix µs), dead ("1" or "0"), route and key. Redis deletes it an
// hour after exp. The dead letters are indexed in the sorted set
// prefix + "dead", scored by exp.

var (
	_ idempotency.Failer          = (*claim)(nil)
	_ idempotency.DeadLetterStore = (*Store)(nil)
)

// failScript: KEYS rec, failures, dead index; ARGV token, error, at (µs),
// exp (µs), redis expiry (ms), max, route, key, member. It releases the
// claim and counts the failed run, in one step; it returns 1, or 0 if the
// claim had ended.
var failScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'st') ~= 'p' or redis.call('HGET', KEYS[1], 'tok') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local f = redis.call('HMGET', KEYS[2], 'n', 'exp')
local n = 0
if f[1] and tonumber(f[2]) > tonumber(ARGV[3]) then
  n = tonumber(f[1])
end
n = n + 1
local max = tonumber(ARGV[6])
local dead = '0'
if max > 0 and n >= max then
  dead = '1'
end
redis.call('HSET', KEYS[2], 'n', n, 'err', ARGV[2], 'at', ARGV[3], 'exp', ARGV[4], 'dead', dead, 'route', ARGV[7], 'key', ARGV[8])
redis.call('PEXPIREAT', KEYS[2], ARGV[5])
if dead == '1' then
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[9])
else
  redis.call('ZREM', KEYS[3], ARGV[9])
end
return 1
`)

// deadScript: KEYS dead index; ARGV now (µs), route, limit, prefix. It
// returns up to limit dead letters of route live at now, each as key, n,
// err, at, exp; it drops the index entries of failures Redis deleted.
var deadScript = goredis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local out = {}
local found = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local f = redis.call('HMGET', ARGV[4] .. 'f:' .. m, 'route', 'key', 'n', 'err', 'at', 'exp', 'dead')
  if not f[1] then
    redis.call('ZREM', KEYS[1], m)
  elseif f[1] == ARGV[2] and f[7] == '1' then
    table.insert(out, f[2]); table.insert(out, f[3]); table.insert(out, f[4]); table.insert(out, f[5]); table.insert(out, f[6])
    found = found + 1
    if found >= tonumber(ARGV[3]) then
      break
    end
  end
end
return out
`)

func (s *Store) failKey(member string) string { return s.prefix + "f:" + member }
func (s *Store) deadIdx() string              { return s.prefix + "dead" }

// Failures implements idempotency.Failer: one round trip.
func (c *claim) Failures(ctx context.Context, now time.Time) (int, bool, error) {
	f, err := c.s.client.HMGet(ctx, c.s.failKey(c.member), "n", "exp", "dead").Result()
	if err != nil {
		return 0, false, wrap(ctx, "failures", err)
	}
	ns, ok1 := f[0].(string)
	es, ok2 := f[1].(string)
	if !ok1 || !ok2 {
		return 0, false, nil // none
	}
	n, err1 := strconv.Atoi(ns)
	exp, err2 := strconv.ParseInt(es, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false, fmt.Errorf("%w: failures %q %q", ErrCorrupt, ns, es)
	}
	if exp <= now.UnixMicro() {
		return 0, false, nil
	}
	return n, f[2] == "1", nil
}

// Fail implements idempotency.Failer: one script, one round trip.
func (c *claim) Fail(ctx context.Context, run idempotency.FailedRun) error {
	n, err := failScript.Run(context.WithoutCancel(ctx), c.s.client,
		[]string{c.rec, c.s.failKey(c.member), c.s.deadIdx()},
		c.token, run.Error, run.At.UnixMicro(), run.Expires.UnixMicro(), run.Expires.Add(redisMargin).UnixMilli(),
		run.Max, c.sc.Route, c.sc.Key, c.member).Int64()
	if err != nil {
		return fmt.Errorf("idempotency/redis: fail: %w", err)
	}
	if n == 0 {
		return idempotency.ErrClaimEnded
	}
	return nil
}

// DeadLetters implements idempotency.DeadLetterStore: one script.
func (s *Store) DeadLetters(ctx context.Context, route string, now time.Time, limit int) ([]idempotency.DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	res, err := deadScript.Run(ctx, s.client, []string{s.deadIdx()}, now.UnixMicro(), route, limit, s.prefix).StringSlice()
	if err != nil {
		return nil, wrap(ctx, "dead letters", err)
	}
	out := make([]idempotency.DeadLetter, 0, len(res)/5)
	for i := 0; i+5 <= len(res); i += 5 {
		n, err1 := strconv.Atoi(res[i+1])
		at, err2 := strconv.ParseInt(res[i+3], 10, 64)
		exp, err3 := strconv.ParseInt(res[i+4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%w: dead letter %q", ErrCorrupt, res[i:i+5])
		}
		out = append(out, idempotency.DeadLetter{Key: res[i], Failures: n, LastError: res[i+2],
			Failed: time.UnixMicro(at), Expires: time.UnixMicro(exp)})
	}
	return out, nil
}

// ReleaseDeadLetter implements idempotency.DeadLetterStore.
func (s *Store) ReleaseDeadLetter(ctx context.Context, sc idempotency.Scope) error {
	h := sc.Hash()
	member := hex.EncodeToString(h[:])
	pipe := s.client.TxPipeline()
	pipe.Del(ctx, s.failKey(member))
	pipe.ZRem(ctx, s.deadIdx(), member)
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(ctx, "release dead letter", err)
	}
	return nil
}
