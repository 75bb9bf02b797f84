package resilient_test

import (
	"context"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression: Error.StatusCode is "the status of the last response seen", but finish
// hard-codes 0 while fail reports it.
func TestErrorCarriesLastStatus(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.Fail(readErr()))
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithMaxAttempts(2))...), stubtest.Post(context.Background(), "{}"))
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 503, re.StatusCode)
}
