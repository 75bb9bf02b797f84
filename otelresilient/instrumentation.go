package otelresilient

import (
	"errors"
	"fmt"

	"github.com/resilienthttp/resilient"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the meter New uses.
const ScopeName = "github.com/resilienthttp/resilient/otelresilient"

// durationBuckets returns the histogram boundaries, in seconds: those of the
// semantic conventions' http.client.request.duration, plus 30 s, the
// Transport's default Retry-After maximum.
func durationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30}
}

// Instrumentation turns the Events of resilient Transports into the metrics
// and span events listed in the package documentation. Build it with New,
// then hand Observer (or TransportOption) to each Transport to observe.
//
// The zero Instrumentation is not usable. An Instrumentation holds no
// per-request state: it is safe for concurrent use by multiple goroutines,
// and one can serve any number of Transports.
type Instrumentation struct {
	attempts        metric.Int64Counter
	retries         metric.Int64Counter
	tokensRejected  metric.Int64Counter
	budgetRejected  metric.Int64Counter
	breakerRefused  metric.Int64Counter
	breakerChanges  metric.Int64Counter
	replays         metric.Int64Counter
	inProgress      metric.Int64Counter
	payloadMismatch metric.Int64Counter
	hedges          metric.Int64Counter
	pushbacks       metric.Int64Counter
	pushbackRefused metric.Int64Counter
	retryDelay      metric.Float64Histogram
	opDuration      metric.Float64Histogram

	meter         metric.Meter                  // for ObserveIdempotency's callbacks
	idemDecisions metric.Int64ObservableCounter // see ObserveIdempotency
}

// New creates the instruments from the configured MeterProvider and returns
// an Instrumentation. The error, prefixed "otelresilient:", wraps the
// MeterProvider's errors; a provider that cannot create an instrument still
// yields a usable Instrumentation (OpenTelemetry returns no-op instruments
// alongside such errors), so callers may log the error and go on.
func New(opts ...Option) (*Instrumentation, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	m := c.meterProvider.Meter(ScopeName)

	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		ctr, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return ctr
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets()...))
		errs = append(errs, err)
		return h
	}
	i := &Instrumentation{
		attempts:        counter("resilient.attempts", "{attempt}", "Attempts sent, first attempts and retries."),
		retries:         counter("resilient.retries", "{retry}", "Decisions to retry a request."),
		tokensRejected:  counter("resilient.tokens.rejections", "{rejection}", "Requests whose retry the host's retry tokens refused."),
		budgetRejected:  counter("resilient.budget.rejections", "{rejection}", "Requests whose retry the host's retry budget refused."),
		breakerRefused:  counter("resilient.breaker.refusals", "{refusal}", "Requests stopped because the host's circuit breaker was open."),
		breakerChanges:  counter("resilient.breaker.transitions", "{transition}", "State changes of a host's circuit breaker."),
		replays:         counter("resilient.replays", "{replay}", "Answers the server replayed from its idempotency store."),
		inProgress:      counter("resilient.conflicts.in_progress", "{conflict}", "Attempts answered 409: the same key is still being processed."),
		payloadMismatch: counter("resilient.conflicts.payload_mismatch", "{conflict}", "Attempts refused because the key was used with another payload."),
		hedges:          counter("resilient.hedges", "{hedge}", "Hedges sent: extra copies of a slow request (resilient.WithHedging)."),
		pushbacks:       counter("resilient.pushbacks", "{answer}", "Answers in which the server pushed back: no retries to the host for a while."),
		pushbackRefused: counter("resilient.pushback.refusals", "{refusal}", "Requests whose retry was not sent because the host's server had pushed back."),
		retryDelay:      seconds("resilient.retry.delay", "Wait before a retry: backoff or server-directed delay."),
		opDuration:      seconds("resilient.operation.duration", "Duration of a request through the Transport, all attempts and waits included."),
	}
	i.meter = m
	var err error
	i.idemDecisions, err = m.Int64ObservableCounter("resilient.server.idempotency.decisions", metric.WithUnit("{request}"),
		metric.WithDescription("Decisions of a server's idempotency middleware or inbox (package idempotency)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return i, fmt.Errorf("otelresilient: creating instruments: %w", err)
	}
	return i, nil
}

// Observer returns the resilient.Observer that records Events into i's
// instruments and onto the request's span.
func (i *Instrumentation) Observer() resilient.Observer {
	return i.observe
}

// TransportOption returns resilient.WithObserver(i.Observer()), to pass to
// resilient.NewTransport, NewClient or Wrap.
func (i *Instrumentation) TransportOption() resilient.Option {
	return resilient.WithObserver(i.Observer())
}
