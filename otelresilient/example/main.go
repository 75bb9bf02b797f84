// Command example shows the metrics and span events otelresilient records for
// one POST that a server answers 503, 503, then 201.
//
// It runs a local HTTP server on 127.0.0.1, sends the request through a
// resilient client instrumented with otelresilient, and prints what an
// in-memory OpenTelemetry pipeline (a ManualReader and a SpanRecorder)
// collected:
//
//	cd otelresilient && go run ./example
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/otelresilient"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run does the whole demonstration and writes its report to w.
func run(ctx context.Context, w io.Writer) error {
	// A server that sheds the first two attempts. It dedupes by key and says
	// so by echoing it, which is what lets the client retry a POST.
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
		if seen.Add(1) <= 2 {
			http.Error(rw, "busy", http.StatusServiceUnavailable)
			return
		}
		rw.WriteHeader(http.StatusCreated)
		io.WriteString(rw, `{"id":"ch_1"}`)
	}))
	defer srv.Close()

	// In-memory pipelines; a real program would use an OTLP exporter.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.WithoutCancel(ctx))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.WithoutCancel(ctx))

	inst, err := otelresilient.New(otelresilient.WithMeterProvider(mp))
	if err != nil {
		return fmt.Errorf("example: %w", err)
	}
	client := resilient.NewClient(inst.TransportOption(),
		resilient.WithBackoff(resilient.Exponential(10*time.Millisecond, 50*time.Millisecond)))
	defer client.CloseIdleConnections()

	ctx, span := tp.Tracer("example").Start(ctx, "create charge")
	status, err := post(ctx, client, srv.URL+"/v1/charges")
	span.End()
	if err != nil {
		return fmt.Errorf("example: %w", err)
	}
	fmt.Fprintf(w, "response: %d after %d attempts\n\n", status, seen.Load())

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return fmt.Errorf("example: collecting metrics: %w", err)
	}
	fmt.Fprintln(w, "metrics:")
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			printMetric(w, m, srv.Listener.Addr().String())
		}
	}
	fmt.Fprintln(w, "\nspan events:")
	for _, s := range spans.Ended() {
		for _, e := range s.Events() {
			fmt.Fprintf(w, "  %s %s: %s\n", s.Name(), e.Name, formatAttrs(e.Attributes))
		}
	}
	return nil
}

func post(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"amount":1000}`))
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// printMetric writes one line per data point; the server's random port is
// shown as "server" so the output reads the same on every run.
func printMetric(w io.Writer, m metricdata.Metrics, host string) {
	fmt.Fprintf(w, "  %s (%s)\n", m.Name, m.Unit)
	var lines []string
	line := func(attrs attribute.Set, value string) {
		lines = append(lines, fmt.Sprintf("    %s  %s", strings.ReplaceAll(formatAttrs(attrs.ToSlice()), host, "server"), value))
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			line(dp.Attributes, fmt.Sprint(dp.Value))
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			line(dp.Attributes, fmt.Sprintf("count=%d sum=%.3fs", dp.Count, dp.Sum))
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func formatAttrs(kvs []attribute.KeyValue) string {
	parts := make([]string, len(kvs))
	for i, kv := range kvs {
		parts[i] = string(kv.Key) + "=" + kv.Value.String()
	}
	return strings.Join(parts, " ")
}
