package otelresilient

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/resilienthttp/resilient/idempotency"
)

// ObserveIdempotency reports the counts of a server's idempotency
// middleware or Inbox (package idempotency) as the observable counter
// resilient.server.idempotency.decisions, read from stats (its Stats
// method) at each collection. Its attributes are name, the caller's name
// for the middleware, and decision: stored, replayed, in_progress,
// mismatch, expired, released or store_error. Unregister the returned
// Registration when the middleware is gone.
func (i *Instrumentation) ObserveIdempotency(name string, stats func() idempotency.Stats) (metric.Registration, error) {
	attrs := func(decision string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("name", name), attribute.String("decision", decision)))
	}
	opts := [...]metric.ObserveOption{
		attrs("stored"), attrs("replayed"), attrs("in_progress"), attrs("mismatch"),
		attrs("expired"), attrs("released"), attrs("store_error"),
	}
	reg, err := i.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		for k, v := range [...]int64{s.Stored, s.Replayed, s.InProgress, s.Mismatch, s.Expired, s.Released, s.StoreError} {
			o.ObserveInt64(i.idemDecisions, v, opts[k])
		}
		return nil
	}, i.idemDecisions)
	if err != nil {
		return nil, fmt.Errorf("otelresilient: observe idempotency %q: %w", name, err)
	}
	return reg, nil
}
