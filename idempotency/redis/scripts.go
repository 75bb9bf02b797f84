package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts of a Store; each runs atomically on the server. A record
// is a hash: st ("p" while in progress, "d" once done), fp (the
// fingerprint, hex), and while in progress tok (the claim's token) and
// lease (Unix µs); once done status, hdr (JSON), body and exp (Unix µs).
// Times are the caller's clock; the Redis TTL (PEXPIREAT, Redis's clock)
// is a safety net an hour later.

// beginScript: KEYS rec, idx; ARGV fp, now (µs), lease (µs), token,
// redis expiry (ms), member, grace (µs). It returns {"busy"},
// {"mismatch"}, {"replay", status, hdr, body} or {"claimed", expired}.
// It also drops the index entries whose records Redis has deleted.
var beginScript = goredis.NewScript(`
local now = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - tonumber(ARGV[7])))
local r = redis.call('HMGET', KEYS[1], 'st', 'fp', 'lease', 'exp', 'status', 'hdr', 'body')
local expired = 0
if r[1] == 'p' then
  if tonumber(r[3]) > now then
    return {'busy'}
  end
elseif r[1] == 'd' then
  if tonumber(r[4]) <= now then
    expired = 1
  elseif r[2] ~= ARGV[1] then
    return {'mismatch'}
  else
    return {'replay', r[5], r[6], r[7]}
  end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[6])
redis.call('HSET', KEYS[1], 'st', 'p', 'fp', ARGV[1], 'lease', ARGV[3], 'tok', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
return {'claimed', expired}
`)

// completeScript: KEYS rec, idx; ARGV token, status, hdr, body, exp (µs),
// redis expiry (ms), member. It returns 1, or 0 if the claim had ended.
var completeScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'st') ~= 'p' or redis.call('HGET', KEYS[1], 'tok') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 'tok', 'lease')
redis.call('HSET', KEYS[1], 'st', 'd', 'status', ARGV[2], 'hdr', ARGV[3], 'body', ARGV[4], 'exp', ARGV[5])
redis.call('PEXPIREAT', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[7])
return 1
`)

// releaseScript: KEYS rec; ARGV token. It returns 1, or 0 if the claim had
// ended.
var releaseScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'st') ~= 'p' or redis.call('HGET', KEYS[1], 'tok') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`)

// renewScript: KEYS rec; ARGV token, lease (µs), redis expiry (ms). It
// moves the claim's lease and returns 1, or 0 if the claim had ended.
var renewScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'st') ~= 'p' or redis.call('HGET', KEYS[1], 'tok') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
`)

// sweepScript: KEYS idx; ARGV now (µs), limit, prefix. It deletes up to
// limit completed records expired before now and returns {deleted,
// index entries examined}.
var sweepScript = goredis.NewScript(`
local ms = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, m in ipairs(ms) do
  local rk = ARGV[3] .. m
  local r = redis.call('HMGET', rk, 'st', 'exp')
  if r[1] == 'd' and tonumber(r[2]) < tonumber(ARGV[1]) then
    n = n + redis.call('DEL', rk)
  end
  redis.call('ZREM', KEYS[1], m)
end
return {n, #ms}
`)
