package otelresilient

import (
	"context"

	"github.com/resilienthttp/resilient"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// AttemptEventName is the name of the span event added for each attempt.
const AttemptEventName = "resilient.attempt"

// addSpanEvent adds the "resilient.attempt" event of an EventAttempt to the
// span in ctx, if it is recording.
func addSpanEvent(ctx context.Context, e resilient.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kvs := make([]attribute.KeyValue, 0, 6)
	if e.Key != "" {
		kvs = append(kvs, attribute.String("idempotency_key", e.Key))
	}
	kvs = append(kvs, attribute.Int("attempt", e.Attempt))
	if e.StatusCode != 0 {
		kvs = append(kvs, attribute.Int("status", e.StatusCode))
	}
	if e.Category != resilient.CategoryNone {
		kvs = append(kvs, attribute.String("category", string(e.Category)))
	}
	kvs = append(kvs, attribute.String("action", e.Action.String()))
	if e.Replayed {
		kvs = append(kvs, attribute.Bool("replayed", true))
	}
	span.AddEvent(AttemptEventName, trace.WithAttributes(kvs...))
}
