package resilient

import (
	"context"
	"log/slog"
)

// logObserver turns Events into slog records: retries and hedges at Debug,
// successful outcomes at Info, other outcomes and pushback answers at Warn.
// Attributes: idempotency_key, attempt, delay, status, category, outcome
// (plus host, method, operation and error where set; hedge=true on a hedge;
// hedges, winner — the attempt whose answer was returned — and hedge_won on
// the outcome of a request that sent hedges). No headers, no bodies.
func logObserver(l *slog.Logger) Observer {
	return func(ctx context.Context, e Event) {
		var level slog.Level
		var msg string
		switch e.Kind {
		case EventAttempt:
			if !e.Pushback {
				return
			}
			level, msg = slog.LevelWarn, "resilient: pushback"
		case EventRetry:
			level, msg = slog.LevelDebug, "resilient: retry"
		case EventHedge:
			level, msg = slog.LevelDebug, "resilient: hedge"
		case EventOutcome:
			level, msg = slog.LevelInfo, "resilient: outcome"
			if e.Outcome != OutcomeSuccess && e.Outcome != OutcomeReplayed {
				level = slog.LevelWarn
			}
		case EventStore:
			l.LogAttrs(ctx, slog.LevelError, "resilient: store", slog.String("idempotency_key", e.Key),
				slog.String("operation", e.Operation), slog.String("error", e.Err.Error()))
			return
		case EventBreaker:
			l.LogAttrs(ctx, slog.LevelWarn, "resilient: breaker", slog.String("host", e.Host),
				slog.String("from", e.From.String()), slog.String("to", e.To.String()))
			return
		default:
			return
		}
		if !l.Enabled(ctx, level) {
			return
		}
		attrs := []slog.Attr{
			slog.String("idempotency_key", e.Key),
			slog.Int("attempt", max(e.Attempt, e.Attempts)),
			slog.Duration("delay", e.Delay),
			slog.Int("status", e.StatusCode),
			slog.String("category", string(e.Category)),
			slog.String("outcome", e.Outcome),
			slog.String("host", e.Host),
			slog.String("method", e.Method),
		}
		if e.Operation != "" {
			attrs = append(attrs, slog.String("operation", e.Operation))
		}
		if e.Unknown {
			attrs = append(attrs, slog.Bool("unknown", true))
		}
		if e.Kind == EventHedge {
			attrs = append(attrs, slog.Bool("hedge", true))
		}
		if e.Hedges > 0 {
			attrs = append(attrs, slog.Int("hedges", e.Hedges), slog.Int("winner", e.Attempt), slog.Bool("hedge_won", e.Hedge))
		}
		if e.Resends > 0 {
			attrs = append(attrs, slog.Int("resends", e.Resends))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		}
		l.LogAttrs(ctx, level, msg, attrs...)
	}
}
