package redisbudget

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// flushScript applies one Request to a budget's window on the Redis server's
// clock (TIME), so the processes' clocks do not matter. It mirrors
// window.apply.
//
// KEYS[1] the window: a hash of e<i>, d<i>, r<i> for the 10 buckets i
// (epoch, first attempts, retries); KEYS[2] the processes with demand: a
// sorted set of process → server time of its last flush, in ms. Both keys
// share the budget's hash tag, so a Redis Cluster runs the script on one
// node.
//
// ARGV: process, deposits, unused, unused epoch, demand, want (1/0), ratio,
// reserve, bucket width in µs, process TTL in ms, key TTL in ms.
// Returns {grant, epoch, processes}.
const flushScript = `
redis.replicate_commands() -- writes after TIME: needed before Redis 5, a no-op since
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deposits, unused, uepoch = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local demand, want = tonumber(ARGV[5]), ARGV[6] == '1'
local ratio, reserve, width = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local pttl, kttl = tonumber(ARGV[10]), tonumber(ARGV[11])
local n = 10
local e = math.floor(now / width)
local h = redis.call('HGETALL', KEYS[1])
local f = {}
for i = 1, #h, 2 do f[h[i]] = tonumber(h[i + 1]) end
local slot = e % n
if f['e' .. slot] ~= e then
  f['e' .. slot], f['d' .. slot], f['r' .. slot] = e, 0, 0
end
f['d' .. slot] = f['d' .. slot] + deposits
local rs = nil
if unused > 0 then
  local s = uepoch % n
  if f['e' .. s] == uepoch and uepoch > e - n then
    f['r' .. s] = math.max(f['r' .. s] - unused, 0)
    rs = s
  end
elseif unused < 0 then
  f['r' .. slot] = f['r' .. slot] - unused
end
local d, r = 0, 0
for i = 0, n - 1 do
  local ei = f['e' .. i]
  if ei and ei > e - n and ei <= e then
    d = d + f['d' .. i]
    r = r + f['r' .. i]
  end
end
local nowms = math.floor(now / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', nowms - pttl)
if demand > 0 then
  redis.call('ZADD', KEYS[2], nowms, ARGV[1])
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
local np = redis.call('ZCARD', KEYS[2])
local avail = reserve - r
if d > 0 then avail = avail + ratio * d end
local grant = 0
if want and avail > 0 then
  local permits = math.ceil(avail)
  grant = 1
  if demand > 0 then grant = math.max(math.ceil(permits / math.max(np, 1)), demand) end
  grant = math.min(grant, permits)
end
f['r' .. slot] = f['r' .. slot] + grant
local fields = {'e' .. slot, string.format('%d', e), 'd' .. slot, string.format('%d', f['d' .. slot]),
  'r' .. slot, string.format('%d', f['r' .. slot])}
if rs and rs ~= slot then
  table.insert(fields, 'r' .. rs)
  table.insert(fields, string.format('%d', f['r' .. rs]))
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], kttl)
redis.call('PEXPIRE', KEYS[2], kttl)
return {grant, e, np}
`

var script = goredis.NewScript(flushScript)

// Redis is the Backend of New: the windows in Redis, on the Redis server's
// clock, each request applied by one Lua script, all the requests of a
// Flush in one pipeline. NewRedis returns one. It is safe for concurrent
// use.
type Redis struct {
	client goredis.UniversalClient
	prefix string
}

// NewRedis returns a Backend that keeps the windows in Redis through client,
// under keys that start with prefix ("" means DefaultPrefix). New(client,
// cfg) is NewWithBackend(NewRedis(client, cfg.Prefix), cfg).
func NewRedis(client goredis.UniversalClient, prefix string) *Redis {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Redis{client: client, prefix: prefix}
}

// keys returns the keys of budget name: the window and the processes, under
// one hash tag.
func (b *Redis) keys(name string) []string {
	tag := b.prefix + "{" + name + "}"
	return []string{tag + ":w", tag + ":p"}
}

// Flush applies reqs to their windows and returns the replies; errors are
// per request (Reply.Err), wrapping go-redis's. It sends reqs in one pipeline of EVALSHA (one round trip to a single
// Redis; one per node holding a budget on a Cluster). Requests that meet a
// server without the script (NOSCRIPT: after a restart) are sent again with
// EVAL, in a second round trip.
func (b *Redis) Flush(ctx context.Context, rule Rule, reqs []Request) ([]Reply, error) {
	args := make([][]any, len(reqs))
	for i, r := range reqs {
		want := "0"
		if r.Want {
			want = "1"
		}
		args[i] = []any{r.Process, r.Deposits, r.Unused, r.UnusedEpoch, r.Demand, want,
			strconv.FormatFloat(rule.Ratio, 'g', -1, 64), strconv.FormatFloat(rule.Reserve, 'g', -1, 64),
			rule.Bucket.Microseconds(), rule.ProcessTTL.Milliseconds(),
			(2*windowBuckets*rule.Bucket + rule.ProcessTTL).Milliseconds()}
	}
	cmds := make([]*goredis.Cmd, len(reqs))
	pipe := b.client.Pipeline()
	for i, r := range reqs {
		cmds[i] = script.EvalSha(ctx, pipe, b.keys(r.Name), args[i]...)
	}
	_, _ = pipe.Exec(ctx) // errors are per command
	var again []int
	for i, c := range cmds {
		if goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := b.client.Pipeline()
		for _, i := range again {
			cmds[i] = script.Eval(ctx, pipe, b.keys(reqs[i].Name), args[i]...)
		}
		_, _ = pipe.Exec(ctx)
	}
	out := make([]Reply, len(reqs))
	for i, c := range cmds {
		out[i] = reply(c)
	}
	return out, nil
}

// reply decodes the script's answer.
func reply(c *goredis.Cmd) Reply {
	vals, err := c.Int64Slice()
	if err != nil {
		return Reply{Err: fmt.Errorf("redisbudget: flush: %w", err)}
	}
	if len(vals) != 3 {
		return Reply{Err: errors.New("redisbudget: flush: malformed reply")}
	}
	return Reply{Grant: max(vals[0], 0), Epoch: vals[1], Processes: vals[2]}
}
