// Package idempotency is the server half of idempotency keys: a net/http
// middleware (New) and a function wrapper for consumers of webhooks and
// queues (Inbox) that run an operation once per key, store its answer,
// and replay it to every retry.
//
// A request's key is scoped by method, route template and key (Scope), its
// payload fingerprinted (Config.Fingerprint: method, path, canonical query
// and canonical body), and the record keeps a hash of the principal that
// stored it: another principal is refused, never given the answer. The first
// request claims the scope atomically in a Store and runs; a concurrent
// duplicate is answered 409 with Retry-After, the same key with another
// payload 422, a missing required key 400, all as RFC 9457 problems. A
// stored answer carries Idempotency-Status: stored, its replays
// Idempotency-Status: replayed; no other answer to a request it dedupes
// carries the header (a handler's own is removed). A request passed
// through (no key, or a safe method) is answered by its handler
// untouched. The resilient client counts that header as evidence
// that the server dedupes the route: for an hour after an answer on the
// same host, method and route (first two path segments) carried it, it
// retries a POST on that route whose answer was lost, with no declaration
// (resilient.WithDedupingServer). A fresh client's first POST to a route
// has no such evidence, and its lost answer is not retried, as with a
// bare client: declare the server, or send the application's own key
// (resilient.ContextWithKey), to have it retried.
//
// # Stores
//
// MemoryStore keeps records in one process. Package
// github.com/resilienthttp/resilient/idempotency/postgres keeps them in
// PostgreSQL, in the same transaction as the handler's own rows: the
// effect and the stored answer commit together or not at all. Package
// github.com/resilienthttp/resilient/idempotency/redis keeps them in Redis,
// shared by a service's instances, outside the effect's transaction. The two
// differ in what they store when the handler fails (see New): an atomic
// store rolls a 5xx or a panic back, effects included, so a retry runs
// again; MemoryStore stores it, as Stripe does, since the handler may
// have acted and nothing can undo it.
//
// # Order and limits
//
// Install the middleware after authentication (Config.Principal reads
// what it established) and outside a server-side retry budget such as
// package pushback, so that a replay, which costs one store lookup and
// runs nothing, is never shed. The budget's refusals (503 or 429) are
// released, never stored, so the retry they ask for runs.
//
// The answer is buffered until it is stored, up to Config.MaxAnswer. The
// handler's ResponseWriter implements neither http.Flusher nor
// http.Hijacker, and http.ResponseController reports
// http.ErrNotSupported: a route that streams (server-sent events) or
// takes over the connection (WebSocket) cannot be made idempotent this
// way; wrap only the routes that answer once. Trailers are not stored.
// Requests with a safe method (GET, HEAD, OPTIONS, TRACE), and requests
// without a key unless Config.RequireKey, pass through untouched.
//
// Expired records are ignored when met and deleted by Store.Sweep; run
// SweepEvery in a goroutine, or call Sweep from a scheduled job.
//
// # Time budget and dead letters
//
// A request that carries its caller's time budget (X-Request-Timeout, in
// milliseconds, as resilient.WithTimeBudgetHeader sends it, or Envoy's
// x-envoy-expected-rq-timeout-ms) gets a handler context that ends no
// later than the budget, within Config.Lease; a budget spent before the
// handler starts is answered 408, nothing run or stored (see New).
//
// Inbox.Do counts a message's failed runs in the store; after
// Inbox.MaxFailures (default 5) the message is a dead letter, refused with
// ErrDeadLetter without running fn, listed by Inbox.DeadLetters and run
// again after Inbox.ReleaseDeadLetter. Renewal (Renewer), failure counts
// (Failer) and dead-letter listing (DeadLetterStore) are optional
// interfaces: a Store written for an earlier version still works, without
// them.
package idempotency
