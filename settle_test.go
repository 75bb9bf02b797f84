package resilient_test

// The settle step (settle.go): an attempt judged, its reservation released,
// the host told what it showed, the ledger noting it.

import (
	"context"
	"errors"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression: retryable-but-unsafe outcomes (500 or reset on an unkeyed POST) are
// Terminal, so the breaker counts them as successes and never opens.
func TestBreakerCountsUnsafe5xxAsFailures(t *testing.T) {
	s := stubtest.New(stubtest.Reply(500))
	tr := breakerTransport(s, resilient.WithKeyMethods())
	for range 100 {
		_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
		if errors.Is(err, resilient.ErrCircuitOpen) {
			return
		}
	}
	t.Errorf("100 × 500 from the host, breaker never opened (%d sent)", len(s.Attempts()))
}

// TestSettleRecordsEvidenceObservedOrNot: a plain success settles on a fast
// path when nothing observes the call (no Report, no Observer), and on the
// full path otherwise; both leave what later calls read. Here: a first
// answer that echoes the key is evidence that the server dedupes, so the
// next POST on the route is retried after a 502. Without that first answer,
// the 502 is returned, as from a bare client.
func TestSettleRecordsEvidenceObservedOrNot(t *testing.T) {
	tests := []struct {
		name     string
		evidence bool // the first call's answer echoes the key
		opts     []resilient.Option
		report   bool
		want     int // the second call's status
		attempts int // in all
	}{
		{name: "unobserved (fast path)", evidence: true, want: 201, attempts: 3},
		{name: "with a Report", evidence: true, report: true, want: 201, attempts: 3},
		{name: "with an Observer", evidence: true, opts: []resilient.Option{resilient.WithObserver(func(context.Context, resilient.Event) {})}, want: 201, attempts: 3},
		{name: "no evidence", want: 502, attempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := stubtest.Reply(201)
			if tt.evidence {
				first = stubtest.ReplyDeduping(201)
			}
			s := stubtest.New(first, stubtest.Reply(502), stubtest.ReplyDeduping(201))
			tr := resilient.NewTransport(s, fast(tt.opts...)...)
			ctx := context.Background()
			if tt.report {
				ctx = resilient.ContextWithReport(ctx, new(resilient.Report))
			}
			resp, err := do(t, tr, stubtest.Post(ctx, "{}"))
			require.NoError(t, err)
			require.Equal(t, 201, resp.StatusCode)

			resp, err = do(t, tr, stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
			assert.Equal(t, tt.want, resp.StatusCode)
			assert.Len(t, s.Attempts(), tt.attempts)
		})
	}
}
