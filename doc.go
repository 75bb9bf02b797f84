// Package resilient makes outgoing HTTP calls safe to retry: exactly-once
// effects in an at-least-once world.
//
// A Transport (an http.RoundTripper) wraps another transport. For each
// request — one logical operation — it picks one idempotency key before the
// first attempt and sends it, in the Idempotency-Key header, on every attempt:
// a server that implements idempotency keys (Stripe, Adyen, the IETF draft)
// then applies the operation once however many attempts reach it. Keys are
// UUIDv7 (time-ordered, 122 bits of which 74 random), minted for POST and
// PATCH by default; a key the caller set (header or ContextWithKey) is kept.
// With a persist.Store and ContextWithOperation the key is claimed from
// durable storage, so a process that crashes mid-operation resumes it with the
// same key after restart.
//
// Each attempt's outcome is classified (DefaultClassifier) as success,
// retryable or terminal, honouring Retry-After and other server hints. Retries
// wait with jittered exponential backoff (FullJitter by default), never less
// than the server asked and never past the context's deadline. A POST or
// PATCH that may have been applied is re-sent only where the server is known
// to dedupe by key (the application says so with WithDedupingServer or its
// own key, or the server showed it); otherwise its outcome is returned as a
// bare client would return it (ErrUnsafeRetry).
//
// # Retry control
//
// Which retries a host gets is the retry control's decision, set with
// WithRetryControl from values kept per destination host:
//
//   - RetryTokens, the default: a retry takes a token, a healthy answer
//     earns half of one back, so retries fade as failures grow and stop when
//     everything fails; a refused retry stops with ErrTokensExhausted.
//   - RetryBudget: retries may add a share of the traffic (20 %) plus a
//     floor (10 per second) over a rolling window, whatever their fate;
//     ErrBudgetExhausted. SharedBudget plugs in a budget kept elsewhere,
//     such as one a fleet shares through Redis (package redisbudget).
//   - CircuitBreaker: a classic breaker that, once open, refuses requests
//     without sending them (or only retries, with RetriesOnly);
//     ErrCircuitOpen.
//   - RateLimit: paces every attempt to the host; an attempt that could
//     not go out before the deadline stops with ErrRateLimited.
//
// First attempts are never refused or delayed by the tokens or a budget,
// so wrapping a client cannot make an operation fail that a single attempt
// would have completed; a refused retry returns the last answer. Server
// hints act whatever the control: a 503 with Retry-After holds back the
// host's retries for that long, a 429 with Retry-After its first attempts
// too, when the wait fits their deadline.
//
// Most callers want NewClient or Wrap:
//
//	client := resilient.NewClient()
//	resp, err := client.Post(url, "application/json", body)
//
// The POST carries a key, the same on every attempt. It is retried when the
// failure proves nothing was applied (a dial failure, a 429), and after a
// 5xx or a lost answer only where the server is known to dedupe by key.
// Otherwise the 5xx is returned as a bare client would return it, and a
// Report attached with ContextWithReport says why: Stopped is
// ErrUnsafeRetry.
//
// # Outer retry loops
//
// A call from a loop that retries on its own (an SDK, go-retryablehttp, the
// application's loop) sends one attempt per RoundTrip once the Transport
// knows it is a loop's: by an SDK's marks, by seeing the loop re-send a
// call that failed, or by WithOuterRetries and ContextWithOuterRetries. The
// loop decides whether and when to retry, so wrapping never multiplies its
// attempts. When unsure, the Transport defers to the loop. See
// WithOuterRetries.
//
// When no response comes back, the error is an *Error. Its Unknown field is
// the one to read when money moves: true means an attempt may have reached the
// server without a definitive answer, so the effect may exist; keep Key and
// resolve later (retrying with the same key is safe).
//
// Package fakeserver is a server that implements the other side of the
// contract, with fault injection, for tests; bench/ holds benchmarks and the
// retry-storm simulator.
package resilient
