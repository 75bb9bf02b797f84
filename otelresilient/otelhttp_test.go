package otelresilient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// send makes one POST through rt inside a "caller" span and returns the
// ended spans.
func send(t *testing.T, h *harness, rt http.RoundTripper) []sdktrace.ReadOnlySpan {
	t.Helper()
	ctx, span := h.tp.Tracer("test").Start(context.Background(), "caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{}`))
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // otelhttp ends its span when the body is closed
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	span.End()
	return h.spans.Ended()
}

func otelhttpOptions(h *harness) []otelhttp.Option {
	return []otelhttp.Option{otelhttp.WithTracerProvider(h.tp), otelhttp.WithMeterProvider(noop.NewMeterProvider())}
}

// TestOtelhttpOutside: otelhttp around resilient gives one client span per
// logical request, with one event per attempt.
func TestOtelhttpOutside(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	inner := resilient.NewTransport(newStub(statuses(503, 503, 201)...), h.inst.TransportOption(), fixedBackoff())
	spans := send(t, h, otelhttp.NewTransport(inner, otelhttpOptions(h)...))

	require.Len(t, spans, 2)
	client, caller := spans[0], spans[1]
	assert.Equal(t, trace.SpanKindClient, client.SpanKind())
	assert.Equal(t, caller.SpanContext().SpanID(), client.Parent().SpanID())
	require.Len(t, client.Events(), 3)
	for _, e := range client.Events() {
		assert.NotEmpty(t, eventAttrs(e)["idempotency_key"])
	}
	assert.Empty(t, caller.Events())
}

// TestOtelhttpInside: otelhttp under resilient gives one client span per
// attempt; the attempt events go on the caller's span.
func TestOtelhttpInside(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	base := otelhttp.NewTransport(newStub(statuses(503, 503, 201)...), otelhttpOptions(h)...)
	spans := send(t, h, resilient.NewTransport(base, h.inst.TransportOption(), fixedBackoff()))

	require.Len(t, spans, 4)
	caller := spans[3]
	for _, s := range spans[:3] {
		assert.Equal(t, trace.SpanKindClient, s.SpanKind())
		assert.Equal(t, caller.SpanContext().SpanID(), s.Parent().SpanID())
		assert.Empty(t, s.Events())
	}
	require.Len(t, caller.Events(), 3)
}
