package resilient

import (
	"context"
	"log/slog"
)

// logObserver turns Events into slog records: retries, hedges and resumes at Debug,
// successful outcomes at Info, other outcomes and pushback answers at Warn.
// Its attributes are idempotency_key, attempt, delay, status, category and
// outcome. Host, method, operation and error are added where set. A hedge
// has hedge=true. The outcome of a request that sent hedges has hedges,
// winner (the attempt whose answer was returned) and hedge_won. No headers,
// no bodies.
func logObserver(l *slog.Logger) Observer {
	return func(ctx context.Context, e Event) {
		switch e.Kind {
		case EventStore:
			l.LogAttrs(ctx, slog.LevelError, "resilient: store", slog.String("idempotency_key", e.Key),
				slog.String("operation", e.Operation), slog.String("error", e.Err.Error()))
			return
		case EventBreaker:
			l.LogAttrs(ctx, slog.LevelWarn, "resilient: breaker", slog.String("host", e.Host),
				slog.String("from", e.From.String()), slog.String("to", e.To.String()))
			return
		}
		level, msg, ok := logLevel(e)
		if !ok || !l.Enabled(ctx, level) {
			return
		}
		l.LogAttrs(ctx, level, msg, logAttrs(e)...)
	}
}

// logLevel returns the level and message of a request's event, and false
// for an event that is not logged (an attempt without pushback).
func logLevel(e Event) (slog.Level, string, bool) {
	switch e.Kind {
	case EventAttempt:
		return slog.LevelWarn, "resilient: pushback", e.Attempt.Pushback
	case EventRetry:
		return slog.LevelDebug, "resilient: retry", true
	case EventHedge:
		return slog.LevelDebug, "resilient: hedge", true
	case EventResume:
		return slog.LevelDebug, "resilient: resume", true
	case EventOutcome:
		if e.Outcome != OutcomeSuccess && e.Outcome != OutcomeReplayed {
			return slog.LevelWarn, "resilient: outcome", true
		}
		return slog.LevelInfo, "resilient: outcome", true
	}
	return 0, "", false
}

// logAttrs returns the attributes of a request's event.
func logAttrs(e Event) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("idempotency_key", e.Key),
		slog.Int("attempt", max(e.Attempt.Attempt, e.Summary.Attempts)),
		slog.Duration("delay", e.Delay),
		slog.Int("status", e.Attempt.StatusCode),
		slog.String("category", string(e.Attempt.Category)),
		slog.String("outcome", string(e.Outcome)),
		slog.String("host", e.Host),
		slog.String("method", e.Method),
	}
	if e.Operation != "" {
		attrs = append(attrs, slog.String("operation", e.Operation))
	}
	if e.Summary.Unknown {
		attrs = append(attrs, slog.Bool("unknown", true))
	}
	if e.Kind == EventHedge {
		attrs = append(attrs, slog.Bool("hedge", true))
	}
	if e.Summary.Hedges > 0 {
		attrs = append(attrs, slog.Int("hedges", e.Summary.Hedges), slog.Int("winner", e.Attempt.Attempt), slog.Bool("hedge_won", e.Attempt.Hedge))
	}
	resends, err := e.Attempt.Resends, e.Attempt.Err // an attempt's, a retry's
	if e.Kind == EventOutcome {
		resends, err = e.Summary.Resends, e.Err
	}
	if resends > 0 {
		attrs = append(attrs, slog.Int("resends", resends))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	return attrs
}
