// Package otelresilient reports what a resilient.Transport does as
// OpenTelemetry metrics and span events.
//
// It is an Observer of the Transport's Event stream, like the slog observer
// behind resilient.WithLogger: every number below is derived from one Event,
// nothing is measured twice and the Transport's attempt loop is not wrapped.
//
//	inst, err := otelresilient.New() // the global MeterProvider
//	if err != nil { ... }
//	client := resilient.NewClient(inst.TransportOption())
//
// # Metrics
//
// Instruments are created once by New, from the MeterProvider given with
// WithMeterProvider (default: otel.GetMeterProvider()), under the
// instrumentation scope "github.com/resilienthttp/resilient/otelresilient".
//
//	instrument                            kind       unit          one count or sample per
//	resilient.attempts                    counter    {attempt}     attempt sent, first or retry
//	resilient.retries                     counter    {retry}       decision to retry
//	resilient.tokens.rejections           counter    {rejection}   request whose retry the retry tokens refused (outcome tokens_exhausted)
//	resilient.budget.rejections           counter    {rejection}   request whose retry the budget refused (outcome budget_exhausted)
//	resilient.breaker.refusals            counter    {refusal}     request stopped by an open breaker (outcome circuit_open)
//	resilient.breaker.transitions         counter    {transition}  state change of a host's breaker
//	resilient.pushbacks                   counter    {answer}      answer in which the server pushed back (AttemptReport.Pushback)
//	resilient.pushback.refusals           counter    {refusal}     request whose retry a server's pushback held back (outcome pushback)
//	resilient.replays                     counter    {replay}      answer the server replayed from its key store
//	resilient.conflicts.in_progress       counter    {conflict}    attempt classified CONFLICT.in_progress (409)
//	resilient.conflicts.payload_mismatch  counter    {conflict}    attempt classified CONFLICT.idempotency.payload_mismatch
//	resilient.hedges                      counter    {hedge}       hedge sent (resilient.WithHedging)
//	resilient.retry.delay                 histogram  s             wait before a retry (backoff or server-directed)
//	resilient.operation.duration          histogram  s             request, from RoundTrip to its return, all attempts and waits
//	resilient.server.idempotency.decisions  observable counter  {request}  decision of a server's idempotency middleware (ObserveIdempotency)
//
// Their attributes:
//
//	attempts                                                     host method status category hedge
//	retries, tokens.rejections, budget.rejections, breaker.refusals,
//	pushbacks, pushback.refusals                                 host method status category
//	hedges                                                       host method
//	replays, conflicts.in_progress, conflicts.payload_mismatch   host method status
//	breaker.transitions                                          host from to
//	retry.delay                                                  host method category
//	operation.duration                                           host method outcome status category hedge_won
//	server.idempotency.decisions                                 name decision
//
// host is the request's URL host (host:port), method its HTTP method,
// status the response status code (an int; absent when there was no
// response), category the Classifier's resilient.Category (absent when
// empty, as on a success), outcome one of the resilient.Outcome… constants
// (success, replayed, terminal, retries_exhausted, tokens_exhausted,
// budget_exhausted, circuit_open, delay_too_long, rate_limited, pushback,
// canceled, error), from and to a
// resilient.BreakerState ("closed", "half-open", "open"), hedge true on a
// hedge's attempt (absent otherwise), hedge_won on the duration of a request
// that sent hedges (true when a hedge's answer was returned; absent when no
// hedge was sent). The names are the ones the slog observer uses, so logs
// and metrics join on them.
//
// No metric carries the idempotency key (one time series per operation would
// be unbounded cardinality), and nothing carries headers, bodies or URLs
// beyond the host. A request the Transport refuses before sending (breaker
// open, invalid key) has an operation duration sample and no attempt.
//
// Histogram bucket boundaries, in seconds: 0.005 0.01 0.025 0.05 0.075 0.1
// 0.25 0.5 0.75 1 2.5 5 7.5 10 30 (those of the semantic conventions'
// http.client.request.duration, plus 30 s, the default Retry-After maximum).
// Views on the MeterProvider can change them.
//
// # Traces
//
// Each attempt adds a span event named "resilient.attempt" to the span in
// the request's context (trace.SpanFromContext), with the attributes
//
//	idempotency_key  string  the operation's key, absent when the request has none
//	attempt          int     0 for the first attempt
//	status           int     the response status, absent when there was no response
//	category         string  the Classifier's category, absent when empty
//	action           string  "success", "retry" or "terminal"
//	replayed         bool    present (true) when the server answered from its key store
//	hedge            bool    present (true) when the attempt was a hedge
//
// A hedge adds a "resilient.hedge" event when it is sent (attempt, delay in
// seconds), and a request that sent hedges a "resilient.winner" event when
// it returns (attempt: the one whose answer was returned; hedge: whether it
// was a hedge; hedges: how many were sent).
//
// The key is fine on a span event (one event per attempt, no aggregation) and
// is what ties the trace to the server's idempotency record and to the logs.
// When the context carries no recording span, nothing is done. The package
// creates no spans itself, so it needs no TracerProvider: the events go to
// whichever provider made the caller's span.
//
// # Composing with otelhttp
//
// Where otelhttp's Transport sits decides what a span is:
//
//	otelhttp.NewTransport(resilient.NewTransport(base, inst.TransportOption()))
//
// gives one client span per logical request (otelhttp starts it and puts it in
// the context resilient sees), carrying one "resilient.attempt" event per
// attempt; the span's status is the final one. This is the usual choice.
//
//	resilient.NewTransport(otelhttp.NewTransport(base), inst.TransportOption())
//
// gives one client span per attempt, each with its own trace context header,
// all children of the caller's span; the "resilient.attempt" events go on the
// caller's span (the one in the request's context), not on the attempt spans.
// To mark the attempt spans after the first with the semantic conventions'
// http.request.resend_count, put a ResendCounter below otelhttp:
//
//	resilient.NewTransport(otelhttp.NewTransport(&otelresilient.ResendCounter{Base: base}), inst.TransportOption())
//
// An Instrumentation is safe for concurrent use by multiple goroutines; one
// can serve many Transports.
package otelresilient
