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
	kvs = append(kvs, attribute.Int("attempt", e.Attempt.Attempt))
	if e.Attempt.StatusCode != 0 {
		kvs = append(kvs, attribute.Int("status", e.Attempt.StatusCode))
	}
	if e.Attempt.Category != resilient.CategoryNone {
		kvs = append(kvs, attribute.String("category", string(e.Attempt.Category)))
	}
	kvs = append(kvs, attribute.String("action", e.Attempt.Action.String()))
	if e.Attempt.Replayed {
		kvs = append(kvs, attribute.Bool("replayed", true))
	}
	if e.Attempt.Hedge {
		kvs = append(kvs, attribute.Bool("hedge", true))
	}
	span.AddEvent(AttemptEventName, trace.WithAttributes(kvs...))
}

// HedgeEventName is the name of the span event added when a hedge is sent,
// and WinnerEventName of the one added when a request that sent hedges
// returns, naming the attempt whose answer it returned.
const (
	HedgeEventName  = "resilient.hedge"
	WinnerEventName = "resilient.winner"
)

// addHedgeEvent adds the "resilient.hedge" event of an EventHedge.
func addHedgeEvent(ctx context.Context, e resilient.Event) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(HedgeEventName, trace.WithAttributes(attribute.Int("attempt", e.Attempt.Attempt),
			attribute.Float64("delay", e.Delay.Seconds())))
	}
}

// addWinnerEvent adds the "resilient.winner" event of the EventOutcome of a
// request that sent hedges.
func addWinnerEvent(ctx context.Context, e resilient.Event) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(WinnerEventName, trace.WithAttributes(attribute.Int("attempt", e.Attempt.Attempt),
			attribute.Bool("hedge", e.Attempt.Hedge), attribute.Int("hedges", e.Summary.Hedges)))
	}
}

// ResumeEventName is the name of the span event added when the body of a
// GET's answer is resumed after a broken read (an EventResume). It is
// added to the span in the request's context while that span records:
// otelhttp's client span records until the body is read or closed.
const ResumeEventName = "resilient.resume"

// addResumeEvent adds the "resilient.resume" event of an EventResume.
func addResumeEvent(ctx context.Context, e resilient.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kvs := []attribute.KeyValue{attribute.Int("attempt", e.Attempt.Attempt), attribute.String("action", e.Attempt.Action.String())}
	if e.Attempt.StatusCode != 0 {
		kvs = append(kvs, attribute.Int("status", e.Attempt.StatusCode))
	}
	if e.Attempt.Err != nil {
		kvs = append(kvs, attribute.String("error", e.Attempt.Err.Error()))
	}
	span.AddEvent(ResumeEventName, trace.WithAttributes(kvs...))
}
