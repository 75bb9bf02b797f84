package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This is the test an application writes for its own client: each case
// scripts the server's faults and checks the client's result against the
// server's ledger.
func TestCreateCharge(t *testing.T) {
	tests := []struct {
		name     string
		script   []fakeserver.Fault
		wantErr  bool
		requests int64
		effects  int
	}{
		{"healthy", nil, false, 1, 1},
		{"503 then success", []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 503}}, false, 2, 1},
		{"429 with Retry-After", []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 429, RetryAfter: fakeserver.Duration(time.Second)}}, false, 2, 1},
		{"lost response after commit", []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}}, false, 2, 1},
		{"reset before the effect", []fakeserver.Fault{{Kind: fakeserver.FaultReset}}, false, 2, 1},
		{"truncated body", []fakeserver.Fault{{Kind: fakeserver.FaultTruncatedBody}}, true, 1, 1},
		{"persistent outage", []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 503, Count: 10}}, true, 4, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges", Script: tc.script}))
			defer srv.Close()
			p := NewPayments(srv.URL, srv.Client(), resilient.WithBackoff(resilient.FullJitter(time.Millisecond, 10*time.Millisecond)))
			c, err := p.CreateCharge(context.Background(), "order-42", 1000, "eur")
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, 1000, c.Amount)
			}
			st := srv.Stats()
			assert.Equal(t, tc.requests, st.Requests)
			assert.Equal(t, tc.effects, srv.Effects("order-42"))
			assert.Zero(t, st.DuplicateEffects)
		})
	}
}

// An application that retries on its own, with the same business key, never
// creates a second charge.
func TestApplicationLevelRetryIsTheSameOperation(t *testing.T) {
	srv := fakeserver.New()
	defer srv.Close()
	p := NewPayments(srv.URL, srv.Client())
	c1, err := p.CreateCharge(context.Background(), "order-7", 500, "usd")
	require.NoError(t, err)
	c2, err := p.CreateCharge(context.Background(), "order-7", 500, "usd")
	require.NoError(t, err)
	assert.Equal(t, c1.ID, c2.ID)
	assert.Equal(t, 1, srv.TotalEffects())

	// Same key, different amount: the server refuses, and nothing is retried.
	_, err = p.CreateCharge(context.Background(), "order-7", 999, "usd")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "422")
	assert.Equal(t, 1, srv.TotalEffects())
	assert.False(t, errors.Is(err, resilient.ErrRetriesExhausted))
}
