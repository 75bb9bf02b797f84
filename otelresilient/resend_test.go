package otelresilient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/otelresilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// resendCount returns a span's http.request.resend_count, and whether it
// has one.
func resendCount(s sdktrace.ReadOnlySpan) (int64, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == otelresilient.ResendCountKey {
			return kv.Value.AsInt64(), true
		}
	}
	return 0, false
}

// TestResendCount: with otelhttp inside the resilient Transport (one client
// span per attempt) and a ResendCounter below otelhttp, the first attempt's
// span has no http.request.resend_count, the second has 1, the third 2.
func TestResendCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string // the Transport's attempt header; "" for the default
	}{
		{"default attempt header", ""},
		{"attempt header renamed", "X-Attempt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			stub := newStub(statuses(503, 503, 201)...)
			base := otelhttp.NewTransport(&otelresilient.ResendCounter{Base: stub, Header: tt.header}, otelhttpOptions(h)...)
			opts := []resilient.Option{h.inst.TransportOption(), fixedBackoff()}
			if tt.header != "" {
				opts = append(opts, resilient.WithAttemptHeader(tt.header))
			}
			spans := send(t, h, resilient.NewTransport(base, opts...))

			require.Len(t, spans, 4, "three attempt spans and the caller's")
			var got []any
			for _, s := range spans[:3] {
				require.Equal(t, trace.SpanKindClient, s.SpanKind())
				if n, ok := resendCount(s); ok {
					got = append(got, n)
				} else {
					got = append(got, "absent")
				}
			}
			assert.Equal(t, []any{"absent", int64(1), int64(2)}, got)
			_, ok := resendCount(spans[3])
			assert.False(t, ok, "the caller's span is not an attempt")
		})
	}
}

// TestResendCounterLeavesOtherRequestsAlone: no span, a span that is not
// recording, no header, a malformed one or attempt 0 set nothing, and the
// request always reaches the base unchanged.
func TestResendCounterLeavesOtherRequestsAlone(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	tests := []struct {
		name   string
		header string
		span   bool
		want   []attribute.KeyValue
	}{
		{"no header", "", true, nil},
		{"attempt 0", "0", true, nil},
		{"malformed", "one", true, nil},
		{"negative", "-1", true, nil},
		{"attempt 3, no span", "3", false, nil},
		{"attempt 3", "3", true, []attribute.KeyValue{otelresilient.ResendCountKey.Int(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			var span trace.Span
			if tt.span {
				ctx, span = tp.Tracer("test").Start(ctx, tt.name)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{}`))
			require.NoError(t, err)
			if tt.header != "" {
				req.Header.Set(resilient.DefaultAttemptHeader, tt.header)
			}
			stub := newStub(statuses(201)...)
			resp, err := (&otelresilient.ResendCounter{Base: stub}).RoundTrip(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			assert.Equal(t, 1, stub.sent)
			if span == nil {
				return
			}
			span.End()
			ended := rec.Ended()
			assert.Equal(t, tt.want, ended[len(ended)-1].Attributes())
		})
	}
}
