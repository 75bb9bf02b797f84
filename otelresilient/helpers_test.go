package otelresilient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/resilienthttp/resilient/otelresilient"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// reply is one scripted answer of a stubBase.
type reply struct {
	status int
	header http.Header
	body   string
}

// stubBase is a base RoundTripper that answers from a script, then repeats
// the last reply. It never touches the network.
type stubBase struct {
	mu      sync.Mutex
	replies []reply
	sent    int
}

func newStub(replies ...reply) *stubBase { return &stubBase{replies: replies} }

func statuses(codes ...int) []reply {
	r := make([]reply, len(codes))
	for i, c := range codes {
		r[i] = reply{status: c}
	}
	return r
}

func (s *stubBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	s.mu.Lock()
	r := s.replies[min(s.sent, len(s.replies)-1)]
	s.sent++
	s.mu.Unlock()
	h := r.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if k := keyOf(req.Header); k != "" {
		h.Set("Idempotency-Key", k) // the API dedupes by key and says so, as Stripe's does
	}
	return &http.Response{
		StatusCode: r.status, Status: http.StatusText(r.status), Header: h, Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader(r.body)), ContentLength: int64(len(r.body)),
	}, nil
}

// harness holds in-memory OpenTelemetry pipelines and an Instrumentation
// feeding them.
type harness struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	inst   *otelresilient.Instrumentation
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		require.NoError(t, mp.Shutdown(context.Background()))
		require.NoError(t, h.tp.Shutdown(context.Background()))
	})
	var err error
	h.inst, err = otelresilient.New(otelresilient.WithMeterProvider(mp))
	require.NoError(t, err)
	return h
}

// collect returns the metrics recorded so far, by instrument name.
func (h *harness) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, otelresilient.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// counts returns a counter's data points as "attr=value,…" → value.
func counts(t *testing.T, ms map[string]metricdata.Metrics, name string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, ok := ms[name]
	if !ok {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	require.True(t, sum.IsMonotonic, name)
	for _, dp := range sum.DataPoints {
		if dp.Value != 0 {
			out[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Value
		}
	}
	return out
}

// histograms returns a histogram's data points as "attr=value,…" → point.
func histograms(t *testing.T, ms map[string]metricdata.Metrics, name string) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	m, ok := ms[name]
	if !ok {
		return out
	}
	hist, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	for _, dp := range hist.DataPoints {
		out[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp
	}
	return out
}

// eventAttrs returns the attributes of a span event as name → value string.
func eventAttrs(e sdktrace.Event) map[string]string {
	out := map[string]string{}
	for _, kv := range e.Attributes {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// keyOf reads the idempotency key of a request the Transport sent, as a
// server does: field names are case-insensitive (the Transport sends its
// key as "idempotency-key").
func keyOf(h http.Header) string {
	for name, vs := range h {
		if len(vs) > 0 && strings.EqualFold(name, "Idempotency-Key") {
			return vs[0]
		}
	}
	return ""
}
