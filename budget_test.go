package resilient_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBudget is a Budget that records its calls and allows a fixed
// number of withdrawals.
type countingBudget struct {
	mu                           sync.Mutex
	allow                        int
	deposits, withdraws, refunds int
}

func (b *countingBudget) DepositAt(time.Time) { b.mu.Lock(); b.deposits++; b.mu.Unlock() }
func (b *countingBudget) RefundAt(time.Time)  { b.mu.Lock(); b.refunds++; b.mu.Unlock() }
func (b *countingBudget) WithdrawAt(time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.withdraws++
	if b.allow == 0 {
		return false
	}
	b.allow--
	return true
}

func TestSharedBudget(t *testing.T) {
	tests := []struct {
		name          string
		allow         int
		wantAttempts  int
		wantWithdraws int
	}{
		{"the budget refuses every retry", 0, 1, 1},
		{"the budget allows one retry", 1, 2, 2},
		{"the budget allows them all", 10, 4, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &countingBudget{allow: tt.allow}
			var hosts []string
			s := stubtest.New(stubtest.Reply(503))
			tr := resilient.NewTransport(s,
				resilient.WithBackoff(resilient.Exponential(0, 0)),
				resilient.WithRetryControl(resilient.SharedBudget(func(host string) resilient.Budget {
					hosts = append(hosts, host)
					return b
				})))
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test:8080/v1/x", nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, []string{"api.test:8080"}, hosts, "one budget per host, asked for once")
			assert.Len(t, s.Attempts(), tt.wantAttempts)
			assert.Equal(t, 1, b.deposits, "the first attempt deposits")
			assert.Equal(t, tt.wantWithdraws, b.withdraws)
			assert.Zero(t, b.refunds)
		})
	}
}

func TestSharedBudgetNilMeansNoBudget(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503))
	tr := resilient.NewTransport(s, resilient.WithBackoff(resilient.Exponential(0, 0)),
		resilient.WithRetryControl(resilient.RetryTokens{}, resilient.SharedBudget(func(string) resilient.Budget { return nil })))
	resp, err := tr.RoundTrip(mustGet(t, "http://api.test/v1/x"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Len(t, s.Attempts(), 4, "the retry tokens alone limit retries")
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// Regression: a retry paid for from the budget and then not sent (the caller
// cancels during the backoff) is refunded.
func TestBudgetRefundsUnsentRetry(t *testing.T) {
	b := retrycontrol.NewBudget(retrycontrol.BudgetConfig{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second}) // 1 retry per window
	available := b.Available
	before := available()
	require.Equal(t, 1.0, before)
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := resilient.NewTransport(s, resilient.WithRetryControl(resilient.RetryTokens{}, resilient.SharedBudget(func(string) resilient.Budget { return b })),
		resilient.WithBackoff(resilient.Exponential(time.Hour, time.Hour)))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := do(t, tr, stubtest.Post(ctx, "{}"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, s.Attempts(), 1)
	assert.Equal(t, before, available(), "no retry was sent, none is charged")

	// A retry that is sent stays charged.
	s2 := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(201))
	tr2 := resilient.NewTransport(s2, resilient.WithRetryControl(resilient.RetryTokens{}, resilient.SharedBudget(func(string) resilient.Budget { return b })), resilient.WithBackoff(nil))
	_, err = do(t, tr2, stubtest.Post(context.Background(), "{}"))
	require.NoError(t, err)
	assert.Equal(t, 0.0, available())
}
