// Package fakeserver is a fake HTTP API that implements server-side
// idempotency faithfully and injects faults, for testing any HTTP client that
// retries (it does not depend on the resilient package).
//
// # Resources
//
// POST /v1/{collection} creates an object — the effect — from a JSON object
// body: the server appends it to its ledger and answers 201 with the object
// (the request's fields plus "id", "object" and "created") and a Location.
// GET /v1/{collection}/{id} reads it. Errors are RFC 9457 problem details
// (application/problem+json) whose type starts with ProblemTypeBase.
//
// # Idempotency
//
// A POST that carries Idempotency-Key (bare, abc, or as the IETF draft's
// quoted string, "abc"; at most MaxKeyLength bytes) is idempotent. Every
// answer to a request with a key echoes it (Idempotency-Key), faults and
// sheds included, as Stripe's API does: that is how a client learns that
// the server dedupes. Its record
// is keyed by the principal (SHA-256 of Authorization; the header is never
// stored), the method and route, and the key; it holds the request's
// fingerprint, SHA-256 of the method, the path and the canonical JSON body
// (sorted keys, normalised numbers). The first request claims the key
// atomically and executes; meanwhile a duplicate gets 409 with Retry-After
// (problem type .../in-progress). A completed key replays the stored status,
// headers and body byte for byte, with Idempotency-Status: replayed and
// Idempotent-Replayed: true (the first answer says Idempotency-Status: stored).
// The same key with another fingerprint gets 422 (or 409, see
// Scenario.MismatchStatus), problem type .../payload-mismatch, code
// idempotency.payload_mismatch. A route can require the key (400 without it).
// Records expire after Scenario.TTL and are bounded by Scenario.MaxRecords
// (read at New and Reset). The records and these decisions are package
// idempotency's middleware and MemoryStore, configured by the scenario;
// validation, faults, capacity, the ledger and the admin API stay here.
//
// What is stored is set by Scenario.Mode: by default (ModeIETF) a transient
// failure injected after the claim releases the key, so the retry executes;
// ModeStripe stores whatever was answered once execution started.
//
// # Faults
//
// A request goes through these steps, each of which may fail it:
//
//  1. admission: an Outage window answers its status; the Capacity model
//     queues the request or sheds it with 503 (at a cost, Capacity.ShedCost);
//  2. validation: route, key and JSON body (400, 404, 405, 413);
//  3. the route's next outcome (Route): the Script, then a random draw
//     (FailureRate, Mix), deterministic for a Scenario.Seed: from one
//     stream in arrival order, or (Route.Draw = DrawOperation) from a hash
//     of the request's operation and attempt number, so that every client's
//     k-th attempt of an operation meets the same fate (OperationFate);
//  4. the claim of the key (409, 422 or a replay are decided here);
//  5. before the effect: Latency, then FaultStatus, FaultReset or FaultHang;
//  6. the effect and the completion of the record;
//  7. the transmission: FaultLostResponse (the effect is committed, the
//     response is never sent), FaultSlowBody, FaultTruncatedBody,
//     FaultMalformedBody.
//
// Faults that drop the connection panic with http.ErrAbortHandler; on a
// socket a reset first hijacks the connection and closes it with SO_LINGER 0.
// Transport serves requests in-process with no socket and turns those drops
// into the errors a socket gives (see Server.Transport).
//
// # Oracles
//
// Stats, Effects, TotalEffects and Ledger tell a test what the server saw and
// did: requests (with a per-second series), first attempts and retries (from
// the Retry-Attempt request header), effects and duplicate effects, replays,
// conflicts, mismatches, capacity rejections and faults by kind. Reset clears
// them between tests.
//
// # Admin endpoints
//
// Handler also serves, under /_fake/, endpoints that let a test in any
// language drive a server started by cmd/fakeserver: GET and PUT
// /_fake/scenario, POST /_fake/enqueue, GET /_fake/stats, GET /_fake/ledger,
// GET /_fake/effects?key=K and POST /_fake/reset. The README describes them
// and the scenario JSON.
package fakeserver
