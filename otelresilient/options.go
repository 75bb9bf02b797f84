package otelresilient

import "go.opentelemetry.io/otel/metric"

// Option configures New. Options are applied in order; the last one that sets
// a value wins.
type Option func(*config)

// config is New's resolved configuration.
type config struct {
	meterProvider metric.MeterProvider
}

// WithMeterProvider sets the MeterProvider the instruments are created from
// (default: the global one, otel.GetMeterProvider(), read when New runs). A
// nil provider restores the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}
