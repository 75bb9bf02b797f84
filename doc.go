// Package resilient makes outgoing HTTP calls safe to retry: exactly-once
// effects in an at-least-once world.
//
// A Transport (an http.RoundTripper) wraps another transport. It treats each
// request as one logical operation. Before the first attempt it picks one
// idempotency key. It sends that key, in the Idempotency-Key header, on every
// attempt. A server that implements idempotency keys (Stripe, Adyen, the IETF
// draft) then applies the operation once, however many attempts reach it.
//
// Keys are UUIDv7: time-ordered, with 74 of their 122 bits random. They are
// minted for POST and PATCH by default. A key the caller set (header or
// ContextWithKey) is kept. With a persist.Store and ContextWithOperation the
// key is claimed from durable storage. A process that crashes mid-operation
// then resumes it with the same key after restart.
//
// Each attempt's outcome is classified (DefaultClassifier) as success,
// retryable or terminal. Retry-After and other server hints are honoured.
// Retries wait with jittered exponential backoff (FullJitter by default). A
// wait is never shorter than the server asked and never runs past the
// context's deadline. A retry that could not finish before the deadline (its
// wait and the host's usual attempt latency) is not started.
//
// Most callers want NewClient or Wrap:
//
//	client := resilient.NewClient()
//	resp, err := client.Post(url, "application/json", body)
//
// The POST carries a key, the same on every attempt. It is retried when the
// failure proves nothing was applied (a dial failure, a 429). After a 5xx or
// a lost answer it is retried only where the server is known to dedupe by
// key. Otherwise the 5xx is returned as a bare client would return it. A
// Report attached with ContextWithReport says why: Stopped is ErrUnsafeRetry.
//
// # Unsafe requests
//
// An unsafe request is a POST, a PATCH, or any method RFC 9110 does not call
// idempotent. Retrying one after it may have been applied is safe only if the
// server dedupes it by its key, or if it cannot apply twice. A key alone
// proves nothing. An API that
// ignores Idempotency-Key applies a re-sent POST twice. So the Transport
// re-sends such a request only with evidence that the server dedupes on that
// route, or under a strong precondition (see "Conditional requests"):
//
//   - the application said so: WithDedupingServer names the host (and
//     optionally a path prefix), or the key is the application's own (its
//     header, ContextWithKey, or a named operation in a Store);
//   - the server showed it: a response on the same host, method and route
//     (the first two path segments) echoed the request's key header,
//     carried Idempotency-Status or Idempotent-Replayed, or answered 409
//     "in progress" for the key. The response must be within the last hour
//     (dedupeEvidenceTTL); the response being classified counts.
//
// Without evidence the request is re-sent only when the failure proves it
// was not applied: the dial failed, nothing was written, or a 429. Anything
// else is returned as a bare client would return it. Report.Stopped (or
// Error.Reason) is then ErrUnsafeRetry, with Unknown set where it applies.
// A request without a key (a method outside WithKeyMethods) has no
// evidence of the first kind: without a precondition, it is re-sent only
// then, even after a 503, 408 or 425.
//
// # Conditional requests
//
// A strong precondition is evidence of another kind: not that the server
// dedupes, but that a request applied once cannot apply again. A request
// carries one when it has an If-Match of strong entity tags only
// (If-Match: "v7"), or If-None-Match: * (create only). Applying it changes
// the resource's strong tag, or makes the resource exist, so a re-send of
// an applied request fails with 412 (RFC 9110, section 13.1). Such a
// request, keyed or not, is re-sent after a failure that may have been
// applied, as an idempotent one is, under the same retry control.
//
// Other preconditions are not evidence. If-Match: * only asks that the
// resource exist, which a first apply does not change: a PATCH would
// apply twice. A weak tag may survive a change. If-Unmodified-Since may be
// ignored by the server, and its dates have one second's resolution: a
// re-send within the second the first apply happened passes it.
//
// The server must evaluate the precondition, as RFC 9110 requires of an
// origin server, and the request's effect must be a change of its target
// resource. A POST whose effect lies elsewhere (a message sent) needs a
// key that the server dedupes by.
//
// A 412 that answers a re-send after an attempt that may have been
// applied does not say that nothing happened (a GET, HEAD, OPTIONS or
// TRACE applies nothing: its 412 is returned). That attempt may have
// applied the request, or another client changed the resource. The caller
// gets an *Error with Unknown set and the 412 in Error.Response. A 412
// with no such attempt before it, a first attempt's, is the server's
// plain answer, returned as is.
//
// # Retry control
//
// Each destination host has a gate that admits every attempt. Which retries
// the gate admits is the retry control's decision. WithRetryControl sets it
// from values kept per host:
//
//   - RetryTokens, the default: a retry takes a token, a healthy answer
//     earns half of one back. Retries fade as failures grow and stop when
//     everything fails. A refused retry stops with ErrTokensExhausted.
//   - RetryBudget: retries may add a share of the traffic (20 %) plus a
//     floor (10 per second) over a rolling window, whatever their fate.
//     A refused retry stops with ErrBudgetExhausted. SharedBudget plugs in
//     a budget kept elsewhere, such as one a fleet shares through Redis
//     (package redisbudget).
//   - CircuitBreaker: a classic breaker. Once open, it refuses requests
//     without sending them (or only retries, with RetriesOnly). A refused
//     request stops with ErrCircuitOpen.
//   - RateLimit: paces every attempt to the host. An attempt that could
//     not go out before the deadline stops with ErrRateLimited.
//
// The budget, the breaker and the rate limit go in place of the tokens or
// beside them. Only outcomes that say the host is unhealthy (5xx, timeouts,
// resets) count against it.
//
// First attempts are never refused or delayed by the tokens or a budget.
// What a bare client would send is sent. So wrapping a client cannot make an
// operation fail that a single attempt would have completed. A refused retry
// returns the last answer.
//
// A host's routes (a method and the first two path segments) share its
// tokens fairly. A route takes at most the bucket's size beyond what its own
// healthy answers earn back. So a dead route does not starve the others.
//
// Server hints act whatever the control. A 503 with Retry-After is waited
// out by its operation's retry, within the deadline and the control. On a
// host whose recent first attempts show that it sheds, it holds back the
// host's retries for that long. They show it when as many failed as a
// healthy host (1 in 7 failing) shows less than 1 % of the time: 3 of 3,
// 8 of 20, 24 of 100. A 429 with Retry-After holds back its
// first attempts too, when the wait fits their deadline. An answer that asks
// for a pause while one is on means the host is shedding. While it renews
// the pause, retries are refused before any wait, and the caller has the
// last answer at once. A pause set or renewed while a retry waits does not
// drop that retry. The server's pushback, an opened breaker or a rate limit
// past the deadline still do.
//
// Per-host state is created on a host's first request. It is forgotten once
// the host has been idle for a window (10 s by default) with no pause pending
// and no breaker open. So memory follows the set of active hosts.
//
// # Calls of one key
//
// The application may send one operation twice at the same time: one key of
// its own (its header, ContextWithKey, a named operation in a Store). Such
// calls take turns. A call whose key is in flight on the Transport waits for
// that call to end, within its own context. Then it sends its own attempts.
// A server that dedupes answers them with the committed answer.
//
// The server never sees two attempts of one key at once from the Transport.
// No call spends a retry token waiting out a 409 "in progress". A call whose
// context ends while it waits has sent nothing. It returns an *Error with
// the key and Unknown set. A minted key is unique and never waits. A 409 "in
// progress" comes from the key's call in another process. It is retried
// after the server's Retry-After, without a retry token.
//
// # Outer retry loops
//
// An outer retry loop calls RoundTrip again for each of its attempts. It may
// be an SDK that retries on its own (openai-go, aws-sdk-go-v2, stripe-go),
// go-retryablehttp, or the application's own loop. If the Transport retried
// inside each call as well, the attempts would multiply. An SDK's 3 over the
// Transport's 4 make up to 12, and each call would carry a new key. So the
// Transport and such a loop act as one retry loop:
//
//   - The loop drives. A call from a loop that will retry sends one
//     attempt. The loop decides whether and when to send the next, as it
//     would over a bare client. The attempts on the wire are the loop's,
//     never more.
//   - The gate governs. A call that is the loop's retry (its mark counts
//     attempts before it) is admitted as a retry. It is refused, and
//     nothing is sent, when the server pushed back, the breaker is open,
//     the host's retry tokens are spent, or the deadline leaves no room
//     for the host's usual latency. The refusal is an answer the loop does
//     not retry: internal/wire/sdkmarks.go's table of marks says which SDKs honour it
//     (see WithRefusalResponses).
//   - The loop chooses when to send. The Transport adds no wait of its
//     own. The one wait it adds is the server's: a retry the loop sends
//     before the time its server named (Retry-After and the headers
//     ServerDelay reads) waits what is left of it, within the caller's
//     deadline and WithRetryAfterMax. Past those it goes as the loop sends
//     it. A Stainless SDK waits Retry-After itself, and waits no more. An
//     AWS SDK ignores Retry-After: over the Transport its retry waits it.
//     Such a delay never refuses a retry.
//   - One key per logical call. The SDK's own call id, when it sends one
//     (AWS, Google), is the key. Otherwise a retry takes the key of the
//     one pending call it continues: same method, URL and body, whose last
//     mark is one less. When none or several match, the retry gets a new
//     key. Two goroutines sending the same request are two calls, and a
//     key is never shared by two calls.
//   - One count. Retry-Attempt, the Report and the Events number the
//     attempt as the loop does.
//
// The Transport knows a call is a loop's by an SDK's marks, by seeing the
// loop re-send a call that failed, or by WithOuterRetries and
// ContextWithOuterRetries. A request whose SDK marks its attempts is a
// loop's: X-Stainless-Retry-Count, amz-sdk-request with max above 1,
// Google's gccl-attempt-count, stripe-go's key repeated. Report.Deferred and
// the outcome Event's Summary say which rule deferred a call.
//
// # Loops without marks
//
// Some loops send no mark the Transport knows: go-retryablehttp and the
// clients built on it, a cloud SDK's pipeline, a search client, a
// hand-written loop. Such a loop is recognised by what it does. After one of
// its calls ended with a retryable failure, it sends the call again. The
// Transport then defers to it, as to a marked SDK. None of this is on the
// path of a request without marks until a call fails.
//
// Nothing on a call's first arrival tells a loop's call from a plain one. So
// each rule acts only on evidence, and each is as strong as what it may
// decide. A re-send is recognised within five minutes of the failure (loops
// come back within seconds: go-retryablehttp waits at most 30 s by default,
// Azure's pipeline 60 s, a backoff library capped at a minute up to 90 s
// with its jitter). The rules:
//
//   - request: the same *http.Request arrives again. Its earlier call
//     ended with a retryable failure and is no longer in flight. The
//     body's fingerprint is equal, and the body is not the one that call
//     consumed. The call continues that call: it takes its key and its
//     attempt count, and the gate admits it as a retry. This rule alone
//     shares a key, and alone may have the gate refuse the re-send.
//   - header: the same Header map, or the same request without the
//     conditions above. net/http's shallow copy of a request under
//     Client.Timeout keeps the map. The call defers, under a key of its
//     own.
//   - identical: the same method, URL, header fields and body. Fields a
//     loop sets anew on each try (a signature, its date, trace context)
//     are left out. A streamed body has no fingerprint before it is sent,
//     so its length stands in. The call defers, under a key of its own.
//   - site: the call site (the caller's frames above net/http) has shown
//     its loop: a re-send from it was recognised by a rule above. A call
//     from it that fails retryably gets no retry of the Transport's. The
//     site is read only once a call has failed, so a success costs
//     nothing.
//
// Every rule requires the re-send to come from the call site and the
// goroutine of the failure it continues: a loop runs in one goroutine. The
// header and identical rules only defer. Code that gives one Header map to
// many requests would otherwise merge two calls under one key. So would two
// goroutines that send one request. The call they defer is admitted as a
// first attempt, never refused, as a bare client's call is not. It may be
// another call.
//
// A site is unlearned when a call's first failure from it, deferred to the
// loop, is not sent again within those five minutes. A plain call taken for
// a loop so gets the Transport's retries back. A loop that ran out of attempts
// stops repeating too, but its last failure is a re-send, not a call's
// first.
//
// The first call of a loop not yet seen is retried by the Transport until
// its re-send is recognised. It costs at most the Transport's retries of one
// call more than the loop alone. Any other request is retried by the
// Transport.
//
// The direction of safety: a rule that is unsure defers to the loop. A wrong
// guess that way costs only help: one attempt, as a bare client sends. A
// wrong guess the other way multiplies attempts.
//
// # Keys on the wire
//
// The Transport sends a key it adds under the header's lower-case spelling
// ("idempotency-key") when the header is Idempotency-Key or
// X-Idempotency-Key. net/http re-sends by itself, after a reused connection
// dies, any request that carries one of them canonically spelled. A POST
// re-sent after it was applied is a second effect on a server that ignores
// keys.
//
// The field is the same on the wire: names are case-insensitive, and HTTP/2
// lower-cases them. A base RoundTripper that reads it should look it up
// without regard to case. net/http's other re-sends go ahead, as for a bare
// client: nothing written on a reused connection, or an HTTP/2 stream the
// server refused or never processed. Report.Resends counts them.
//
// # The RoundTripper contract
//
// RoundTrip never modifies the caller's request. An attempt that adds to it
// is sent on a copy: the key and attempt headers, a buffered body, an
// attempt timeout. An unkeyed first attempt with nothing to add is the
// request itself, as a bare client sends it.
//
// RoundTrip takes its context from req.Context(). It closes the request body
// on every path. It returns a response or an error, never both. When the
// last attempt produced a response, that response is returned with a nil
// error, a final 503 included, so the caller sees the real status. Bodies of
// discarded responses are drained (at most 64 KiB, for at most 100 ms) and
// closed.
//
// When no response comes back, the error is an *Error. Its Reason says why
// retries stopped. Its Unknown field is the one to read when money moves.
// True means an attempt may have reached the server without a definitive
// answer, so the effect may exist. Keep Key and resolve later: retrying with
// the same key is safe.
//
// Package fakeserver is a server that implements the other side of the
// contract, with fault injection, for tests. bench/ holds benchmarks and the
// retry-storm simulator.
package resilient
