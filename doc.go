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
// than the server asked and never past the context's deadline. Three
// mechanisms keep retries from becoming a storm when a host degrades: a
// rolling-window retry budget per host (20 % of first attempts plus 10 per
// second), a circuit breaker per host (github.com/sony/gobreaker/v2), and an
// optional rate limit per host (golang.org/x/time/rate); a 429 or 503 with
// Retry-After pauses every request to that host.
//
// Most callers want NewClient or Wrap:
//
//	client := resilient.NewClient()
//	resp, err := client.Post(url, "application/json", body) // retried with one key
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
