package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts that keep a record and its three indexes consistent; each
// runs atomically on the server. The keys of every script are, in order,
// those it names below; recPrefix (the Store's prefix + "rec:") is passed as
// an argument so that a script can reach the record of an index member.
//
// A record is a hash with fields key, fp, created (Unix microseconds),
// state (1 pending, 2 done) and attempts. The indexes are sorted sets of
// operation names: "pending" and "all" scored by created, "exp" scored by the
// Unix millisecond at which Redis expires the record (only with a TTL).

// claimManyScript claims operations in order, each created only if its
// record does not exist: KEYS pending, all, exp, then one rec per claim; ARGV
// ttl (ms, 0 for none), recPrefix, then op, key, fp, created, attempts per
// claim. It returns one reply per claim: {0, {fields}} for an existing
// record, {1} for a new one. With a TTL it also drops from the indexes up to
// 16 operations whose records Redis has expired.
var claimManyScript = goredis.NewScript(`
local ttl = tonumber(ARGV[1])
local now = 0
if ttl > 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local out, byCreated, byExpiry = {}, {}, {}
for i = 4, #KEYS do
  local a = 3 + (i - 4) * 5
  local rec, op, created = KEYS[i], ARGV[a], ARGV[a + 3]
  if redis.call('EXISTS', rec) == 1 then
    out[#out + 1] = {0, redis.call('HMGET', rec, 'key', 'fp', 'created', 'state', 'attempts')}
  else
    redis.call('HSET', rec, 'key', ARGV[a + 1], 'fp', ARGV[a + 2], 'created', created, 'state', '1', 'attempts', ARGV[a + 4])
    byCreated[#byCreated + 1] = created
    byCreated[#byCreated + 1] = op
    if ttl > 0 then
      redis.call('PEXPIRE', rec, ttl)
      byExpiry[#byExpiry + 1] = now + ttl
      byExpiry[#byExpiry + 1] = op
    end
    out[#out + 1] = {1}
  end
end
-- One ZADD per index for the batch's new records.
if #byCreated > 0 then
  redis.call('ZADD', KEYS[1], unpack(byCreated))
  redis.call('ZADD', KEYS[2], unpack(byCreated))
end
if #byExpiry > 0 then
  redis.call('ZADD', KEYS[3], unpack(byExpiry))
end
if ttl > 0 then
  local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 16)
  for _, m in ipairs(stale) do
    local left = redis.call('PTTL', ARGV[2] .. m)
    if left > 0 then
      redis.call('ZADD', KEYS[3], now + left, m)
    elseif left == -1 then
      redis.call('ZREM', KEYS[3], m)
    else
      redis.call('ZREM', KEYS[1], m)
      redis.call('ZREM', KEYS[2], m)
      redis.call('ZREM', KEYS[3], m)
    end
  end
end
return out
`)

// finishScript: KEYS rec, pending; ARGV state, attempts, op. It returns 0 if
// the record does not exist, else 1. The record keeps its TTL.
var finishScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
-- Done (2) is final: a later Pending keeps it.
if redis.call('HGET', KEYS[1], 'state') == '2' then
  redis.call('HSET', KEYS[1], 'attempts', ARGV[2])
  return 1
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'attempts', ARGV[2])
if ARGV[1] == '1' then
  redis.call('ZADD', KEYS[2], redis.call('HGET', KEYS[1], 'created'), ARGV[3])
else
  redis.call('ZREM', KEYS[2], ARGV[3])
end
return 1
`)

// deleteScript: KEYS rec, pending, all, exp; ARGV op.
var deleteScript = goredis.NewScript(`
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
`)

// expireScript: KEYS pending, all, exp; ARGV cutoff (Unix microseconds,
// exclusive), limit, recPrefix. It deletes up to limit records created before
// cutoff and returns {records deleted, index entries examined}.
var expireScript = goredis.NewScript(`
local ms = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, m in ipairs(ms) do
  n = n + redis.call('DEL', ARGV[3] .. m)
  redis.call('ZREM', KEYS[1], m)
  redis.call('ZREM', KEYS[2], m)
  redis.call('ZREM', KEYS[3], m)
end
return {n, #ms}
`)

// pendingScript: KEYS pending, all, exp; ARGV min score (inclusive), limit,
// recPrefix. It returns {entries examined, last score examined or false,
// {{op, {fields}}, ...}} for the first limit entries of the pending index from
// min on, and drops entries whose records Redis has expired.
var pendingScript = goredis.NewScript(`
local ms = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #ms, 2 do
  local m = ms[i]
  local rk = ARGV[3] .. m
  if redis.call('EXISTS', rk) == 1 then
    out[#out + 1] = {m, redis.call('HMGET', rk, 'key', 'fp', 'created', 'state', 'attempts')}
  else
    redis.call('ZREM', KEYS[1], m)
    redis.call('ZREM', KEYS[2], m)
    redis.call('ZREM', KEYS[3], m)
  end
end
local last = false
if #ms > 0 then
  last = ms[#ms]
end
return {#ms / 2, last, out}
`)
