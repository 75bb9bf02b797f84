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

// Regression: an unkeyed POST re-sent after a 503 (which the classifier marks
// Unknown) must stay Unknown after the next 200: the first POST may also
// have been applied.
func TestUnkeyedPostAfter503StaysUnknown(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503), stubtest.Reply(200))
	rep := new(resilient.Report)
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithKeyMethods())...),
		stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
	require.NoError(t, err)
	assert.Len(t, s.Attempts(), 2, "a 503 is retried for any method (shed before processing, by convention)")
	assert.True(t, rep.Unknown, "without a key the second success does not answer for the first POST")
}
