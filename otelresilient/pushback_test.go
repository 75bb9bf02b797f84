package otelresilient_test

import (
	"net/http"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPushback: a pushback answer is counted, and so is the next
// operation's retry that it held back.
func TestPushback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	stub := newStub(
		reply{status: 503, header: http.Header{"Retry-After": {"5"}, "X-Should-Retry": {"false"}}},
		reply{status: 503},
	)
	tr := resilient.NewTransport(stub, h.inst.TransportOption(), fixedBackoff())

	for _, key := range []string{"charge-1", "charge-2"} {
		resp, err := post(t, h, tr, key)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}

	ms := h.collect(t)
	pushback := "category=DEPENDENCY.unavailable,host=api.test,method=POST,status=503"
	assert.Equal(t, map[string]int64{pushback: 1}, counts(t, ms, "resilient.pushbacks"))
	assert.Equal(t, map[string]int64{pushback: 1}, counts(t, ms, "resilient.pushback.refusals"))
	assert.Empty(t, counts(t, ms, "resilient.retries"), "no retry at all")
	ops := histograms(t, ms, "resilient.operation.duration")
	assert.Equal(t, uint64(1), ops["category=DEPENDENCY.unavailable,host=api.test,method=POST,outcome=pushback,status=503"].Count)
}
