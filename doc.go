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
// Retries are held to each host's retry tokens by default: a retry takes a
// token, a healthy answer earns half of one back, so retries fade as
// failures grow and stop when everything fails, while first attempts are
// never refused or delayed by them (RetryTokensConfig). A 503 with
// Retry-After holds back the host's retries for that long, a 429 with
// Retry-After its first attempts too, when the wait fits their deadline. A
// rolling-window budget, a circuit breaker (github.com/sony/gobreaker/v2)
// and a rate limit (golang.org/x/time/rate) per host are opt-in.
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
