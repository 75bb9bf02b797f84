// Package redisbudget is a retry budget shared by a fleet of processes
// through Redis: one rolling window per destination host, with the rule of
// resilient.RetryBudget — over the last Window, the fleet's retries to a host stay
// below Ratio × the fleet's first attempts to it + MinPerSecond × Window
// seconds — so that tens to hundreds of processes of 100 operations per
// second or more each cannot together turn a partial outage into a retry
// storm, although none of them alone sees enough to stop it. It is its own
// Go module, so that importing resilient does not pull in a Redis client.
//
//	fleet := redisbudget.New(redisClient, redisbudget.Config{})
//	defer fleet.Close()
//	client := resilient.NewClient(resilient.WithRetryControl(resilient.SharedBudget(fleet.For)))
//
// # How it works
//
// The Transport calls a budget on its request path, and this package never
// makes it wait for Redis. In each process:
//
//   - A first attempt (DepositAt) is one atomic add to a pending count (and
//     one to the local budget, below). When a host's count reaches
//     Config.FlushEvery (128), or Config.FlushInterval (1 s, at most a tenth
//     of the Window) has passed since the last flush, the Fleet's one
//     background goroutine flushes every budget that has something to
//     report, all in one pipeline: one round trip for all hosts. At 200
//     first attempts per second to a host that is 0.78 round trips per 100
//     first attempts, whatever the number of hosts.
//   - A retry (WithdrawAt) takes a permit from the process's lease, a local
//     atomic count. Each flush runs a Lua script on Redis that adds the
//     first attempts to the current bucket of the window, gives back what
//     is left of the process's previous lease, and grants a new lease: of
//     the permits left in the window (the rule's bound less the retries and
//     the other processes' outstanding leases), the larger of an equal
//     share among the processes that asked for retries recently and the
//     retries this process asked for since its last flush (its demand); one
//     permit for a process that asked for none. The grant is charged to the
//     window when it is made, so the leases of all processes together never
//     exceed the rule; permits used while a flush is under way are charged
//     to the next lease. RefundAt gives a permit back to the lease. A
//     process that was quiet and meets an empty lease asks for one early
//     flush, so that the window learns of its demand at once; a busy one
//     never flushes early for retries.
//   - The window lives in Redis, on the Redis server's clock (the script
//     reads TIME): the processes' clocks, and the times passed to DepositAt
//     and WithdrawAt, do not matter to it. Its keys, under Config.Prefix P,
//     share the hash tag of the budget's name, so that Redis Cluster runs
//     the script on one node: P{host}:w, a hash of 10 buckets (epoch, first
//     attempts, retries), and P{host}:p, a sorted set of the processes that
//     asked for retries, by the time of their last flush. Both expire two
//     windows after the last flush.
//
// When Redis is slow or down: each call to Redis is bounded by
// Config.CallTimeout (50 ms), on the background goroutine, whatever the
// go-redis client's own timeouts (a call that outlives its timeout is left
// to finish in its goroutine, and no other call starts until it has). A
// budget whose flush failed or timed out falls back to StateLocal at once:
// its lease is dropped (those permits stay charged to the window, which
// errs on the side of fewer retries) and retries are admitted by a local
// budget with the same rule (resilient.RetryBudget's), which has counted every first
// attempt and retry of the process all along, so it takes over with the
// process's recent history rather than a fresh allowance. The switch is
// reported to Config.OnStateChange and in Stats. The Fleet keeps flushing
// (first attempts of failed flushes are not counted in the shared window,
// again on the side of fewer retries); the first flush that succeeds
// returns the budget to StateShared. A budget therefore leaves the shared
// window at most FlushInterval + CallTimeout after Redis stops answering,
// and in the meantime spends only a lease it was granted.
//
// In StateLocal each process has its own MinPerSecond floor, so a fleet of N
// processes may send up to N × MinPerSecond × Window seconds retries per
// window besides Ratio × its first attempts: set MinPerSecond with that in
// mind.
//
// # Compared with Kora's distributed retry budget
//
// Kora (kora-projects/kora, pull request 842, 2026) keeps a shared token
// balance in Redis with plain commands: each retry and each success is a
// SET NX, an INCRBYFLOAT and a PEXPIRE, sent synchronously on the caller's
// thread, with a withdraw-then-refund when the balance goes negative and a
// best-effort clamp at capacity. This package differs on:
//
//   - Batching: Kora makes about three round trips per request, on the
//     request path; here a request makes none, and a process makes one
//     round trip per FlushEvery first attempts or per FlushInterval, for all
//     of its hosts together, its retries included (they are served from the
//     lease).
//   - Fallback: Kora has none; a Redis that is slow holds up every retry
//     decision for the client's timeouts, and one that is down fails it.
//     Here the request path never waits, Redis' state is reported, and a
//     failure hands the decisions to a local budget that has been kept up
//     to date, within FlushInterval + CallTimeout; the shared window resumes
//     by itself.
//   - The rule: Kora's balance has no time-based floor (that would need a
//     read-modify-write, which it avoids by having no script) and grows with
//     successes only; here the window has Finagle's ratio and MinPerSecond
//     floor, over a rolling window of 10 buckets, on one clock — Redis's —
//     and one atomic script, so that concurrent processes cannot overdraw
//     it.
package redisbudget
