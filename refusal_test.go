package resilient_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
)

// Regression: nil URL with an observer panics in emit.
func TestNilURLWithObserver(t *testing.T) {
	tr := resilient.NewTransport(stubtest.New(stubtest.Reply(200)), resilient.WithObserver(func(context.Context, resilient.Event) {}))
	req := &http.Request{Method: "GET", Header: http.Header{}}
	assert.NotPanics(t, func() {
		_, err := tr.RoundTrip(req)
		assert.ErrorIs(t, err, resilient.ErrInvalidRequest)
	})
}
