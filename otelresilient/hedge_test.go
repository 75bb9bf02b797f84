package otelresilient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/otelresilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowFirst holds the first request until it is cancelled and answers the
// others 200 at once.
type slowFirst struct{ n atomic.Int32 }

func (s *slowFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.n.Add(1) == 1 {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: 200, Status: "OK", Header: http.Header{}, Request: req, ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader("ok"))}, nil
}

// The metrics and span events say which attempt was a hedge and which won.
func TestHedgeWon(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tr := resilient.NewTransport(&slowFirst{}, h.inst.TransportOption(),
		resilient.WithHedging(resilient.HedgingConfig{Delay: time.Millisecond}))
	ctx, span := h.tp.Tracer("test").Start(context.Background(), "read")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/items/1", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	span.End()

	ms := h.collect(t)
	assert.Equal(t, map[string]int64{
		"category=CANCELED,host=api.test,method=GET":     1,
		"hedge=true,host=api.test,method=GET,status=200": 1,
	}, counts(t, ms, "resilient.attempts"))
	assert.Equal(t, map[string]int64{"host=api.test,method=GET": 1}, counts(t, ms, "resilient.hedges"))
	ops := histograms(t, ms, "resilient.operation.duration")
	assert.Contains(t, ops, "hedge_won=true,host=api.test,method=GET,outcome=success,status=200")

	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	var names []string
	for _, e := range spans[0].Events() {
		names = append(names, e.Name)
	}
	require.Equal(t, []string{otelresilient.HedgeEventName, otelresilient.AttemptEventName, otelresilient.AttemptEventName,
		otelresilient.WinnerEventName}, names)
	ev := spans[0].Events()
	assert.Equal(t, map[string]string{"attempt": "1", "status": "200", "action": "success", "hedge": "true"}, eventAttrs(ev[2]))
	assert.Equal(t, map[string]string{"attempt": "1", "hedge": "true", "hedges": "1"}, eventAttrs(ev[3]))
}
