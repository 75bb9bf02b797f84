package otelresilient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/otelresilient"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// One client span per attempt (otelhttp inside the resilient Transport),
// each retry's span carrying http.request.resend_count: a ResendCounter
// sits below otelhttp, where the attempt's span is in the context.
func ExampleResendCounter() {
	// A server that dedupes by key (it echoes it) and sheds the first two
	// attempts.
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
		if seen.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	perAttempt := otelhttp.NewTransport(&otelresilient.ResendCounter{Base: srv.Client().Transport},
		otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(noop.NewMeterProvider()))
	client := &http.Client{Transport: resilient.NewTransport(perAttempt,
		resilient.WithBackoff(resilient.Exponential(time.Millisecond, time.Millisecond)))}

	resp, err := client.Post(srv.URL+"/v1/charges", "application/json", strings.NewReader(`{"amount":1000}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	for _, s := range spans.Ended() {
		count := "none"
		for _, kv := range s.Attributes() {
			if kv.Key == otelresilient.ResendCountKey {
				count = kv.Value.String()
			}
		}
		fmt.Printf("%s span, http.request.resend_count: %s\n", s.SpanKind(), count)
	}
	// Output:
	// client span, http.request.resend_count: none
	// client span, http.request.resend_count: 1
	// client span, http.request.resend_count: 2
}
