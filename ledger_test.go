package resilient_test

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutcomeEventCarriesTheLastStatus: when no attempt answered last, the
// EventOutcome carries the last status seen, as the *Error does and as
// Event.Attempt's doc says.
func TestOutcomeEventCarriesTheLastStatus(t *testing.T) {
	base := stubtest.New(stubtest.Reply(http.StatusServiceUnavailable), stubtest.Fail(syscall.ECONNRESET))
	var out resilient.Event
	tr := resilient.NewTransport(base, resilient.WithMaxAttempts(2), resilient.WithBackoff(nil), resilient.WithObserver(func(_ context.Context, e resilient.Event) {
		if e.Kind == resilient.EventOutcome {
			out = e
		}
	}))
	_, err := tr.RoundTrip(stubtest.Get(context.Background(), "api.test"))
	var re *resilient.Error
	require.True(t, errors.As(err, &re))
	assert.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
	assert.Equal(t, http.StatusServiceUnavailable, out.Attempt.StatusCode, "the last status seen")
	assert.Equal(t, 2, out.Summary.Attempts)
}
