package otelresilient

import (
	"net/http"
	"strconv"

	"github.com/resilienthttp/resilient"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ResendCountKey is the OpenTelemetry HTTP semantic conventions' attribute
// "http.request.resend_count": the ordinal number of a request resending
// attempt, set on every attempt after the first.
const ResendCountKey = semconv.HTTPRequestResendCountKey

// ResendCounter is an http.RoundTripper that sets ResendCountKey on the span
// of each attempt a resilient.Transport sends, when an OpenTelemetry client
// span is started per attempt: otelhttp's Transport inside the resilient one.
//
// otelhttp starts the attempt's span below the resilient Transport, so only
// a RoundTripper below otelhttp sees that span. ResendCounter goes there:
//
//	resilient.NewTransport(otelhttp.NewTransport(&otelresilient.ResendCounter{Base: base}))
//
// It reads the attempt number from the header the resilient Transport sets
// on every retry ("Retry-Attempt" unless changed with
// resilient.WithAttemptHeader; a first attempt has 0 or no header) and,
// when it is above 0, sets it as
// http.request.resend_count on trace.SpanFromContext(req.Context()). An
// absent or malformed header, or a span that is not recording, sets
// nothing. The request is passed on unchanged.
//
// A ResendCounter is safe for concurrent use by multiple goroutines.
type ResendCounter struct {
	// Base sends the request; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Header is the name of the header that carries the attempt number, as
	// given to resilient.WithAttemptHeader; "" means
	// resilient.DefaultAttemptHeader.
	Header string
}

// RoundTrip sets the attempt's resend count on its span and sends req
// through Base.
func (rc *ResendCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	name := rc.Header
	if name == "" {
		name = resilient.DefaultAttemptHeader
	}
	if v := req.Header.Get(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			if span := trace.SpanFromContext(req.Context()); span.IsRecording() {
				span.SetAttributes(ResendCountKey.Int(n))
			}
		}
	}
	base := rc.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}
