package otelresilient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/otelresilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
)

const target = "http://api.test/v1/charges"

// post sends one keyed POST through tr inside a span of h's tracer and
// returns the response (body closed) or error, and the span's events.
func post(t *testing.T, h *harness, tr http.RoundTripper, key string) (*http.Response, error) {
	t.Helper()
	ctx, span := h.tp.Tracer("test").Start(context.Background(), "charge")
	defer span.End()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{"amount":1000}`))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// fixedBackoff makes retry delays exact: 1 ms each.
func fixedBackoff() resilient.Option {
	return resilient.WithBackoff(resilient.Exponential(time.Millisecond, time.Millisecond))
}

func TestRetriedThenCreated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	stub := newStub(statuses(503, 503, 201)...)
	tr := resilient.NewTransport(stub, h.inst.TransportOption(), fixedBackoff())

	resp, err := post(t, h, tr, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	key := keyOf(resp.Request.Header)
	require.NotEmpty(t, key)

	ms := h.collect(t)
	assert.Equal(t, map[string]int64{
		"category=DEPENDENCY.unavailable,host=api.test,method=POST,status=503": 2,
		"host=api.test,method=POST,status=201":                                 1,
	}, counts(t, ms, "resilient.attempts"))
	assert.Equal(t, map[string]int64{
		"category=DEPENDENCY.unavailable,host=api.test,method=POST,status=503": 2,
	}, counts(t, ms, "resilient.retries"))
	for _, name := range []string{"resilient.tokens.rejections", "resilient.budget.rejections", "resilient.breaker.refusals", "resilient.breaker.transitions",
		"resilient.replays", "resilient.conflicts.in_progress", "resilient.conflicts.payload_mismatch"} {
		assert.Empty(t, counts(t, ms, name), name)
	}

	delays := histograms(t, ms, "resilient.retry.delay")
	require.Len(t, delays, 1)
	d := delays["category=DEPENDENCY.unavailable,host=api.test,method=POST"]
	assert.Equal(t, uint64(2), d.Count)
	assert.InDelta(t, 0.002, d.Sum, 1e-12)

	ops := histograms(t, ms, "resilient.operation.duration")
	require.Len(t, ops, 1)
	op := ops["host=api.test,method=POST,outcome=success,status=201"]
	assert.Equal(t, uint64(1), op.Count)
	assert.GreaterOrEqual(t, op.Sum, 0.002, "the operation includes both 1 ms waits")
	assert.Equal(t, []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30}, op.Bounds)

	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	events := spans[0].Events()
	require.Len(t, events, 3)
	want := []map[string]string{
		{"idempotency_key": key, "attempt": "0", "status": "503", "category": "DEPENDENCY.unavailable", "action": "retry"},
		{"idempotency_key": key, "attempt": "1", "status": "503", "category": "DEPENDENCY.unavailable", "action": "retry"},
		{"idempotency_key": key, "attempt": "2", "status": "201", "action": "success"},
	}
	for i, e := range events {
		assert.Equal(t, otelresilient.AttemptEventName, e.Name)
		assert.Equal(t, want[i], eventAttrs(e), "event %d", i)
	}
}

func TestBudgetExhausted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	stub := newStub(statuses(503)...)
	// No ratio and no floor: the budget refuses every retry.
	tr := resilient.NewTransport(stub, h.inst.TransportOption(), fixedBackoff(),
		resilient.WithRetryControl(resilient.RetryTokens{}, resilient.RetryBudget{Ratio: -1, MinPerSecond: -1}))

	resp, err := post(t, h, tr, "charge-1")
	require.NoError(t, err, "the last response is returned")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	ms := h.collect(t)
	attempt := "category=DEPENDENCY.unavailable,host=api.test,method=POST,status=503"
	assert.Equal(t, map[string]int64{attempt: 1}, counts(t, ms, "resilient.attempts"))
	assert.Empty(t, counts(t, ms, "resilient.retries"))
	assert.Empty(t, histograms(t, ms, "resilient.retry.delay"))
	assert.Equal(t, map[string]int64{attempt: 1}, counts(t, ms, "resilient.budget.rejections"))
	ops := histograms(t, ms, "resilient.operation.duration")
	require.Len(t, ops, 1)
	assert.Equal(t, uint64(1), ops["category=DEPENDENCY.unavailable,host=api.test,method=POST,outcome=budget_exhausted,status=503"].Count)

	events := h.spans.Ended()[0].Events()
	require.Len(t, events, 1)
	assert.Equal(t, "charge-1", eventAttrs(events[0])["idempotency_key"])
}

func TestBreakerOpen(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	stub := newStub(statuses(503)...)
	// Trips on the second failure in a row and stays open for the test.
	tr := resilient.NewTransport(stub, h.inst.TransportOption(), fixedBackoff(),
		resilient.WithMaxAttempts(3),
		resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{FailureRatio: 1, MinRequests: 2, OpenTimeout: time.Hour}))

	// First request: 503, retry, 503 trips the breaker, which refuses the
	// second retry; the last 503 is returned.
	resp, err := post(t, h, tr, "charge-1")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	// Second request: refused before sending.
	_, err = post(t, h, tr, "charge-2")
	require.ErrorIs(t, err, resilient.ErrCircuitOpen)
	require.Equal(t, 2, stub.sent)

	ms := h.collect(t)
	attempt := "category=DEPENDENCY.unavailable,host=api.test,method=POST,status=503"
	assert.Equal(t, map[string]int64{attempt: 2}, counts(t, ms, "resilient.attempts"))
	assert.Equal(t, map[string]int64{attempt: 1}, counts(t, ms, "resilient.retries"))
	assert.Equal(t, map[string]int64{"from=closed,host=api.test,to=open": 1}, counts(t, ms, "resilient.breaker.transitions"))
	assert.Equal(t, map[string]int64{
		attempt: 1, // the retry refused after the trip
		"category=CIRCUIT_OPEN,host=api.test,method=POST": 1, // the request refused at once
	}, counts(t, ms, "resilient.breaker.refusals"))
	assert.Empty(t, counts(t, ms, "resilient.budget.rejections"))

	ops := histograms(t, ms, "resilient.operation.duration")
	require.Len(t, ops, 2)
	assert.Equal(t, uint64(1), ops["category=DEPENDENCY.unavailable,host=api.test,method=POST,outcome=circuit_open,status=503"].Count)
	assert.Equal(t, uint64(1), ops["category=CIRCUIT_OPEN,host=api.test,method=POST,outcome=circuit_open"].Count)

	spans := h.spans.Ended()
	require.Len(t, spans, 2)
	assert.Len(t, spans[0].Events(), 2)
	assert.Empty(t, spans[1].Events(), "nothing was sent")
}

func TestConflictsAndReplays(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	stub := newStub(
		reply{status: 409, header: problem, body: `{"type":"https://github.com/resilienthttp/resilient/problems/in-progress"}`},
		reply{status: 201, header: http.Header{"Idempotency-Status": {"replayed"}}},
		reply{status: 422, header: problem, body: `{"type":"https://github.com/resilienthttp/resilient/problems/payload-mismatch"}`},
	)
	tr := resilient.NewTransport(stub, h.inst.TransportOption(), fixedBackoff())

	resp, err := post(t, h, tr, "charge-1")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, err = post(t, h, tr, "charge-1")
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

	ms := h.collect(t)
	assert.Equal(t, map[string]int64{"host=api.test,method=POST,status=409": 1}, counts(t, ms, "resilient.conflicts.in_progress"))
	assert.Equal(t, map[string]int64{"host=api.test,method=POST,status=201": 1}, counts(t, ms, "resilient.replays"))
	assert.Equal(t, map[string]int64{"host=api.test,method=POST,status=422": 1}, counts(t, ms, "resilient.conflicts.payload_mismatch"))
	ops := histograms(t, ms, "resilient.operation.duration")
	assert.Equal(t, uint64(1), ops["host=api.test,method=POST,outcome=replayed,status=201"].Count)
	assert.Equal(t, uint64(1), ops["category=CONFLICT.idempotency.payload_mismatch,host=api.test,method=POST,outcome=terminal,status=422"].Count)

	events := h.spans.Ended()[0].Events()
	require.Len(t, events, 2)
	assert.Equal(t, map[string]string{"idempotency_key": "charge-1", "attempt": "1", "status": "201", "action": "success", "replayed": "true"},
		eventAttrs(events[1]))
}

// TestNoKeyOnMetrics guards the cardinality rule: the key is on span events
// only.
func TestNoKeyOnMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tr := resilient.NewTransport(newStub(statuses(503, 201)...), h.inst.TransportOption(), fixedBackoff())
	for i := range 5 {
		_, err := post(t, h, tr, fmt.Sprintf("charge-%d", i))
		require.NoError(t, err)
	}
	for name, m := range h.collect(t) {
		assert.NotContains(t, fmt.Sprint(m.Data), "charge-", name)
	}
}

// TestStoreErrorIsNotAnOutcome guards against counting a request twice: the
// Transport reports a failed Store.Finish as an EventStore, before the
// request's own EventOutcome.
func TestStoreErrorIsNotAnOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	obs := h.inst.Observer()
	ctx := context.Background()
	obs(ctx, resilient.Event{Kind: resilient.EventStore, Host: "api.test", Method: "POST",
		Err: fmt.Errorf("%w: finish: %w", resilient.ErrStore, errors.New("disk full"))})
	obs(ctx, resilient.Event{Kind: resilient.EventOutcome, Host: "api.test", Method: "POST", Outcome: resilient.OutcomeSuccess,
		Attempt: resilient.AttemptReport{StatusCode: 201}, Summary: resilient.Summary{Attempts: 1, Duration: time.Second}})
	ops := histograms(t, h.collect(t), "resilient.operation.duration")
	require.Len(t, ops, 1)
	op := ops["host=api.test,method=POST,outcome=success,status=201"]
	assert.Equal(t, uint64(1), op.Count)
	assert.Equal(t, 1.0, op.Sum)
}

// TestWithoutSpan checks that a request whose context has no span is
// measured and does not fail.
func TestWithoutSpan(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tr := resilient.NewTransport(newStub(statuses(200)...), h.inst.TransportOption())
	req, err := http.NewRequest(http.MethodGet, target, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, map[string]int64{"host=api.test,method=GET,status=200": 1}, counts(t, h.collect(t), "resilient.attempts"))
	assert.Empty(t, h.spans.Ended())
}

func TestNewDefaultsToGlobalProvider(t *testing.T) {
	t.Parallel()
	inst, err := otelresilient.New()
	require.NoError(t, err)
	require.NotNil(t, inst.Observer())
	inst, err = otelresilient.New(otelresilient.WithMeterProvider(noop.NewMeterProvider()))
	require.NoError(t, err)
	inst.Observer()(context.Background(), resilient.Event{Kind: resilient.EventAttempt, Host: "h", Method: "GET"})
}
