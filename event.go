package resilient

import (
	"context"
	"log/slog"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventAttempt: an attempt finished and was classified.
	EventAttempt EventKind = iota + 1
	// EventRetry: the Transport decided to retry after Delay.
	EventRetry
	// EventOutcome: RoundTrip is returning; Outcome says how.
	EventOutcome
	// EventBreaker: a host's circuit breaker changed state (From, To).
	EventBreaker
	// EventStore: the Store failed to record an operation's outcome (Err
	// wraps ErrStore). The request's own EventOutcome follows.
	EventStore
	// EventHedge: the Transport sent hedge Attempt after waiting Delay for
	// an answer (WithHedging); its EventAttempt follows when it is settled.
	EventHedge
	// EventResume: the Transport resumed the body of a GET's answer after
	// its read broke, or reconnected an event stream, once RoundTrip had
	// returned (docs/resume.md). Attempt
	// is the resume: Attempt.Attempt counts the body's resumes from 1,
	// Wait is how long the gate held it, StatusCode or Err its answer,
	// Action Success when the body reads on. The Report and the
	// EventOutcome of the request are final before it.
	EventResume
)

// OutcomeKind is how a request ended (Event.Outcome of an EventOutcome,
// and the "outcome" log attribute); OutcomeRetry marks an EventRetry.
type OutcomeKind string

// The outcomes.
const (
	OutcomeSuccess          OutcomeKind = "success"
	OutcomeReplayed         OutcomeKind = "replayed"
	OutcomeTerminal         OutcomeKind = "terminal"
	OutcomeRetry            OutcomeKind = "retry"
	OutcomeRetriesExhausted OutcomeKind = "retries_exhausted"
	OutcomeTokensExhausted  OutcomeKind = "tokens_exhausted"
	OutcomeBudgetExhausted  OutcomeKind = "budget_exhausted"
	OutcomeCircuitOpen      OutcomeKind = "circuit_open"
	OutcomeDelayTooLong     OutcomeKind = "delay_too_long"
	OutcomeRateLimited      OutcomeKind = "rate_limited"
	OutcomePushback         OutcomeKind = "pushback"
	OutcomeCanceled         OutcomeKind = "canceled"
	OutcomeError            OutcomeKind = "error"
)

// Event is what an Observer receives. Fields that do not apply to the Kind
// are zero. It never carries headers or bodies.
type Event struct {
	Kind EventKind
	// Host (as in URL.Host), Method, Key and Operation identify the
	// request; an EventBreaker has Host only.
	Host      string
	Method    string
	Key       string
	Operation string
	// Attempt describes the attempt the event is about:
	//   - EventAttempt: the attempt that finished, as in Report.Attempts;
	//   - EventRetry: Attempt.Attempt is the number of the retry to come,
	//     and StatusCode, Category and Err are those of the attempt that
	//     failed (Action is Retry);
	//   - EventHedge: the hedge sent (Attempt.Hedge is true);
	//   - EventOutcome: the attempt whose answer was returned (the winner,
	//     which with hedging may be a hedge: Attempt.Hedge), or, when none
	//     answered, the last status and category seen.
	Attempt AttemptReport
	// Delay is the wait before the next attempt (EventRetry), the wait for
	// an answer before a hedge (EventHedge), or how long the server's
	// pushback holds retries (EventAttempt with Attempt.Pushback).
	Delay time.Duration
	// Outcome is how the request ended (EventOutcome), OutcomeRetry for
	// an EventRetry, and empty otherwise.
	Outcome OutcomeKind
	// Summary describes the whole request (EventOutcome; EventStore has
	// Summary.Attempts).
	Summary Summary
	// From and To are breaker states (EventBreaker).
	From, To BreakerState
	// Err is the error RoundTrip returns (EventOutcome without a
	// response), or the Store's (EventStore, wrapping ErrStore).
	Err error
}

// Summary describes a whole request, in an EventOutcome.
type Summary struct {
	// Attempts is the number of attempts sent.
	Attempts int
	// Resends is the number of re-sends the base transport made on its own,
	// over all attempts (see AttemptReport.Resends).
	Resends int
	// Hedges is the number of hedges sent (WithHedging).
	Hedges int
	// Duration is the request's, from RoundTrip to its return, all attempts
	// and waits included.
	Duration time.Duration
	// Unknown is true when the outcome is unknown: an attempt may have been
	// applied and no success answered for it (see Error.Unknown).
	Unknown bool
	// Deferred names the rule by which the call deferred to an outer
	// retry loop, as Report.Deferred does.
	Deferred string
}

// Observer receives Events. See WithObserver.
type Observer func(ctx context.Context, e Event)

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
