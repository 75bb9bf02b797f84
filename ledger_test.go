package resilient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutcomeEventCarriesTheLastStatus: when no attempt answered last, the
// EventOutcome carries the last status seen, as the *Error does and as
// Event.Attempt's doc says.
func TestOutcomeEventCarriesTheLastStatus(t *testing.T) {
	n := 0
	base := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		n++
		if n == 1 {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
		}
		return nil, syscall.ECONNRESET
	})
	var out Event
	tr := NewTransport(base, WithMaxAttempts(2), WithBackoff(nil), WithObserver(func(_ context.Context, e Event) {
		if e.Kind == EventOutcome {
			out = e
		}
	}))
	_, err := tr.RoundTrip(newGet(context.Background(), "api.test"))
	var re *Error
	require.True(t, errors.As(err, &re))
	assert.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
	assert.Equal(t, http.StatusServiceUnavailable, out.Attempt.StatusCode, "the last status seen")
	assert.Equal(t, 2, out.Summary.Attempts)
}
