package otelresilient

import (
	"context"

	"github.com/resilienthttp/resilient"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Attribute keys of the metrics, the names the slog observer uses.
const (
	keyHost     = attribute.Key("host")
	keyMethod   = attribute.Key("method")
	keyStatus   = attribute.Key("status")
	keyCategory = attribute.Key("category")
	keyOutcome  = attribute.Key("outcome")
	keyFrom     = attribute.Key("from")
	keyTo       = attribute.Key("to")
	keyHedge    = attribute.Key("hedge")
	keyHedgeWon = attribute.Key("hedge_won")
)

// observe is the Observer: one Event in, the instruments it concerns updated.
// It runs on the request's goroutine and takes no lock of its own.
func (i *Instrumentation) observe(ctx context.Context, e resilient.Event) {
	switch e.Kind {
	case resilient.EventAttempt:
		i.onAttempt(ctx, e)
	case resilient.EventRetry:
		attrs := metric.WithAttributeSet(requestAttrs(e, true, true))
		i.retries.Add(ctx, 1, attrs)
		i.retryDelay.Record(ctx, e.Delay.Seconds(), metric.WithAttributeSet(requestAttrs(e, false, true)))
	case resilient.EventHedge:
		addHedgeEvent(ctx, e)
		i.hedges.Add(ctx, 1, metric.WithAttributeSet(requestAttrs(e, false, false)))
	case resilient.EventResume:
		addResumeEvent(ctx, e)
	case resilient.EventOutcome:
		i.onOutcome(ctx, e)
	case resilient.EventBreaker:
		i.breakerChanges.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
			keyHost.String(e.Host), keyFrom.String(e.From.String()), keyTo.String(e.To.String()))))
	}
}

func (i *Instrumentation) onAttempt(ctx context.Context, e resilient.Event) {
	addSpanEvent(ctx, e)
	set := requestAttrs(e, true, true)
	if e.Attempt.Hedge {
		set = attribute.NewSet(append(set.ToSlice(), keyHedge.Bool(true))...)
	}
	i.attempts.Add(ctx, 1, metric.WithAttributeSet(set))
	if e.Attempt.Pushback {
		i.pushbacks.Add(ctx, 1, metric.WithAttributeSet(requestAttrs(e, true, true)))
	}
	if e.Attempt.Replayed || e.Attempt.Category == resilient.CategoryInProgress || e.Attempt.Category == resilient.CategoryPayloadMismatch {
		narrow := metric.WithAttributeSet(requestAttrs(e, true, false))
		switch {
		case e.Attempt.Replayed:
			i.replays.Add(ctx, 1, narrow)
		case e.Attempt.Category == resilient.CategoryInProgress:
			i.inProgress.Add(ctx, 1, narrow)
		default:
			i.payloadMismatch.Add(ctx, 1, narrow)
		}
	}
}

func (i *Instrumentation) onOutcome(ctx context.Context, e resilient.Event) {
	switch e.Outcome {
	case resilient.OutcomeTokensExhausted:
		i.tokensRejected.Add(ctx, 1, metric.WithAttributeSet(requestAttrs(e, true, true)))
	case resilient.OutcomeBudgetExhausted:
		i.budgetRejected.Add(ctx, 1, metric.WithAttributeSet(requestAttrs(e, true, true)))
	case resilient.OutcomeCircuitOpen:
		i.breakerRefused.Add(ctx, 1, metric.WithAttributeSet(requestAttrs(e, true, true)))
	case resilient.OutcomePushback:
		i.pushbackRefused.Add(ctx, 1, metric.WithAttributeSet(requestAttrs(e, true, true)))
	}
	kvs := []attribute.KeyValue{keyHost.String(e.Host), keyMethod.String(e.Method), keyOutcome.String(string(e.Outcome))}
	kvs = appendStatusCategory(kvs, e, true, true)
	if e.Summary.Hedges > 0 {
		addWinnerEvent(ctx, e)
		kvs = append(kvs, keyHedgeWon.Bool(e.Attempt.Hedge))
	}
	i.opDuration.Record(ctx, e.Summary.Duration.Seconds(), metric.WithAttributeSet(attribute.NewSet(kvs...)))
}

// requestAttrs returns host and method, with status and category when asked
// for and set.
func requestAttrs(e resilient.Event, status, category bool) attribute.Set {
	kvs := make([]attribute.KeyValue, 2, 4)
	kvs[0], kvs[1] = keyHost.String(e.Host), keyMethod.String(e.Method)
	return attribute.NewSet(appendStatusCategory(kvs, e, status, category)...)
}

func appendStatusCategory(kvs []attribute.KeyValue, e resilient.Event, status, category bool) []attribute.KeyValue {
	if status && e.Attempt.StatusCode != 0 {
		kvs = append(kvs, keyStatus.Int(e.Attempt.StatusCode))
	}
	if category && e.Attempt.Category != resilient.CategoryNone {
		kvs = append(kvs, keyCategory.String(string(e.Attempt.Category)))
	}
	return kvs
}
