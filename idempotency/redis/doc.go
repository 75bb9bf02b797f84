// Package redis is an idempotency.Store in Redis, for services of several
// instances that share their idempotency records. It is its own Go module,
// so that the idempotency package needs no Redis client.
//
// # What it promises
//
// A claim is atomic on the server (a Lua script): of concurrent requests
// with one scope, in any number of processes, one runs and the others get
// 409 while its lease lasts. The lease is the middleware's Config.Lease
// (the Inbox's Lease), renewed every third of it while the handler runs
// (one script call), so a duplicate gets 409 however slow a live handler
// is. A claim not renewed for a whole lease is taken over by the next
// request, so a run whose process died is run again. The bound: two runs
// at once only if the owner's process is paused (or cut off from Redis)
// for longer than a lease, three renewals in a row, and its handler then
// goes on. The leases are compared on the requesting processes' clocks, so
// a clock that jumps ahead by a lease is such a pause. A handler that never
// returns keeps its key busy for the life of its process. An answer, once
// stored, is replayed until its TTL, 5xx included; it is stored with a
// context of its own, so an answer written as the handler's context ends
// is kept.
//
// The Store is not atomic with the handler's effect, which lives elsewhere
// (Atomic returns false). So, as with MemoryStore, a 5xx, a panic or an
// oversized answer is stored and replayed, never run again: the handler may
// have acted. 408, 425, 429 and 503 are released (the handler says it did
// nothing). What it cannot promise: a process killed after the handler's
// effect and before the answer is stored leaves a claim that ends at its
// lease, and the retry then runs the handler again. Only a store that
// commits the answer with the effect (idempotency/postgres) closes that
// window; with this one, make the effect itself idempotent (for example a
// unique constraint on the key) when that window matters.
//
// # What it needs of Redis
//
// A stored answer must outlive a restart of Redis, or a retry after the
// restart runs the handler again. New therefore reads the server's
// persistence settings (CONFIG GET appendonly appendfsync):
//
//   - appendonly no: New fails with ErrNotDurable (unless AllowVolatile).
//   - appendonly yes, appendfsync always: every claim and answer is on disk
//     before Redis acknowledges it. Nothing is lost.
//   - appendonly yes, appendfsync everysec (Redis's default) or no: a crash
//     of the Redis process loses nothing (its writes are in the kernel), a
//     crash of its host loses the last second or so of records. New logs a
//     warning and goes on.
//
// A Redis whose CONFIG command is disabled (some managed services) fails New
// unless AllowVolatile. Replication is asynchronous: a failover to a replica
// may lose the last acknowledged records, with the same effect as a host
// crash.
//
// # Deadlines
//
// Build the go-redis client with ContextTimeoutEnabled: then a call ends at
// the request's deadline (an error wrapping context.DeadlineExceeded, and
// the middleware answers 503, having run nothing). Without it, go-redis
// bounds a call by its ReadTimeout and WriteTimeout only
// (TestFrozenRedisEndsAtDeadline).
//
// # Keys and time
//
// A record is a hash under the prefix (default DefaultPrefix) and the hex
// SHA-256 of its scope; an index (a sorted set, prefix + "idx") lists
// completed records by expiry for Sweep. On Redis Cluster the prefix must
// hold a hash tag ("{idem}:") so that a record and the index share a slot.
// Leases and expiries are compared with the requesting process's clock, as
// the middleware reads it: keep the servers' clocks in sync. Redis deletes a
// record itself an hour after it expired or its lease ended (the margin
// covers clock skew between the servers and Redis), whether or not Sweep
// ran.
//
// The failed runs of Inbox.Do (its dead letters) are a hash beside the
// record, prefix + "f:" and the scope's hash; a sorted set, prefix +
// "dead", lists the dead letters by expiry. A failed run releases its claim
// and is counted in one script. Reading the count costs Inbox.Do one round
// trip more per run.
package redis
