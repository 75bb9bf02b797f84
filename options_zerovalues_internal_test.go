package resilient

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// TestOptionZeroValues gives every option its zero value (a zero number, an
// empty name, a nil function, a zero config) and checks the resolved
// configuration against what the option's documentation says it means.
func TestOptionZeroValues(t *testing.T) {
	tests := []struct {
		name  string
		opt   Option
		check func(t *testing.T, c *config)
	}{
		{"WithMaxAttempts(0): one attempt, no retries", WithMaxAttempts(0), func(t *testing.T, c *config) {
			assert.Equal(t, 1, c.maxAttempts)
		}},
		{"WithBackoff(nil): no wait", WithBackoff(nil), func(t *testing.T, c *config) {
			assert.Nil(t, c.backoff)
		}},
		{"WithClassifier(nil): DefaultClassifier", WithClassifier(nil), func(t *testing.T, c *config) {
			assert.Equal(t, reflect.ValueOf(DefaultClassifier).Pointer(), reflect.ValueOf(c.classifier).Pointer())
			assert.False(t, c.customClassifier)
		}},
		{"no WithRetryControl: the retry tokens at their defaults", nil, func(t *testing.T, c *config) {
			assert.False(t, c.tokensOff)
			assert.Equal(t, RetryTokens{}, c.tokens)
			assert.Nil(t, c.budgetConfig)
			assert.Nil(t, c.budgetFunc)
			assert.Nil(t, c.breaker)
			assert.Equal(t, rate.Inf, c.rateLimit)
		}},
		{"WithRetryControl(): no retry control", WithRetryControl(), func(t *testing.T, c *config) {
			assert.True(t, c.tokensOff)
			assert.Nil(t, c.budgetConfig)
			assert.Nil(t, c.budgetFunc)
			assert.Nil(t, c.breaker)
			assert.Equal(t, rate.Inf, c.rateLimit)
		}},
		{"RetryTokens{}: the default tokens", WithRetryControl(RetryTokens{}), func(t *testing.T, c *config) {
			assert.False(t, c.tokensOff)
			assert.Equal(t, 3.0, host.NewRetryTokens(retrycontrol.TokensConfig(c.tokens)).AvailableAt(time.Now()), "MinTokens 3")
			assert.Equal(t, int64(host.TokenUnit/2), host.NewRetryTokens(retrycontrol.TokensConfig(c.tokens)).Params().Refill, "Refill 0.5")
		}},
		{"RetryBudget{}: the Finagle budget, instead of the tokens", WithRetryControl(RetryBudget{}), func(t *testing.T, c *config) {
			assert.True(t, c.tokensOff, "a budget alone replaces the tokens")
			require.NotNil(t, c.budgetConfig)
			assert.Equal(t, 100.0, newBudget(*c.budgetConfig).AvailableAt(time.Now()), "10/s over 10 s")
		}},
		{"SharedBudget(nil): no budget, so no control at all", WithRetryControl(SharedBudget(nil)), func(t *testing.T, c *config) {
			assert.True(t, c.tokensOff)
			assert.Nil(t, c.budgetFunc)
			assert.Nil(t, c.budgetConfig)
		}},
		{"CircuitBreaker{}: the default breaker", WithRetryControl(CircuitBreaker{}), func(t *testing.T, c *config) {
			require.NotNil(t, c.breaker)
			assert.Equal(t, CircuitBreaker{FailureRatio: 0.5, MinRequests: 20, Window: 10 * time.Second,
				OpenTimeout: 5 * time.Second, HalfOpenProbes: 1}, *c.breaker)
		}},
		{"RateLimit{}: no limit", WithRetryControl(RateLimit{}), func(t *testing.T, c *config) {
			assert.Equal(t, rate.Inf, c.rateLimit)
		}},
		{"RateLimit{Rate: 5}: burst 1", WithRetryControl(RateLimit{Rate: 5}), func(t *testing.T, c *config) {
			assert.Equal(t, rate.Limit(5), c.rateLimit)
			assert.Equal(t, 1, c.rateBurst)
		}},
		{`WithKeyHeader(""): the default`, WithKeyHeader(""), func(t *testing.T, c *config) {
			assert.Equal(t, DefaultKeyHeader, c.keyHeader)
		}},
		{`WithAttemptHeader(""): no attempt header`, WithAttemptHeader(""), func(t *testing.T, c *config) {
			assert.Empty(t, c.attemptHeader)
		}},
		{"WithKeyFunc(nil): NewKey's UUIDv7s", WithKeyFunc(nil), func(t *testing.T, c *config) {
			assert.Nil(t, c.keyFunc)
		}},
		{"WithKeyMethods(): no key of the Transport's own", WithKeyMethods(), func(t *testing.T, c *config) {
			for _, m := range []string{http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodGet} {
				assert.False(t, c.keyMethods.Has(m), m)
			}
		}},
		{"WithStore(nil): no Store", WithStore(nil), func(t *testing.T, c *config) {
			assert.Nil(t, c.store)
		}},
		{"WithKeyRetention(0): 24 h", WithKeyRetention(0), func(t *testing.T, c *config) {
			assert.Equal(t, 24*time.Hour, c.keyRetention)
		}},
		{"WithKeyRetention(-1): 24 h", WithKeyRetention(-1), func(t *testing.T, c *config) {
			assert.Equal(t, 24*time.Hour, c.keyRetention)
		}},
		{"WithAttemptTimeout(0): none", WithAttemptTimeout(0), func(t *testing.T, c *config) {
			assert.Zero(t, c.attemptTimeout)
		}},
		{"WithRetryAfterMax(0): 30 s", WithRetryAfterMax(0), func(t *testing.T, c *config) {
			assert.Equal(t, 30*time.Second, c.retryAfterMax)
		}},
		{"WithRetryAfterMax(-1): 30 s", WithRetryAfterMax(-1), func(t *testing.T, c *config) {
			assert.Equal(t, 30*time.Second, c.retryAfterMax)
		}},
		{"WithMaxBodyBuffer(0): no buffering", WithMaxBodyBuffer(0), func(t *testing.T, c *config) {
			assert.Zero(t, c.maxBodyBuffer)
		}},
		{"WithLogger(nil): no logging", WithLogger(nil), func(t *testing.T, c *config) {
			assert.Nil(t, c.logger)
			assert.Empty(t, c.observers)
		}},
		{"WithObserver(nil): ignored", WithObserver(nil), func(t *testing.T, c *config) {
			assert.Empty(t, c.observers)
		}},
		{"WithDedupingServer(): none declared", WithDedupingServer(), func(t *testing.T, c *config) {
			assert.Empty(t, c.dedupers)
		}},
		{"WithHedging(HedgingConfig{}): hedging at the p95", WithHedging(HedgingConfig{}), func(t *testing.T, c *config) {
			require.NotNil(t, c.hedge)
			assert.Equal(t, 0.95, c.hedge.quantile)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...), opts...)
			tt.check(t, &tr.cfg)
		})
	}
}

// TestOptionZeroValuesSend: the zero values that used to surprise now send
// what a bare client would, or more.
func TestOptionZeroValuesSend(t *testing.T) {
	t.Run("RateLimit{} limits nothing", func(t *testing.T) {
		s := stubtest.New(stubtest.Deduping([]int{200})...)
		tr := NewTransport(s, WithRetryControl(RateLimit{}, RateLimit{Burst: 5}))
		for range 20 {
			require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		}
		assert.Equal(t, 20, len(s.Attempts()))
	})
	t.Run("WithRetryAfterMax(0) waits for a Retry-After", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Healthy first attempts first: the 503's delay then pauses
			// its operation only (a host without them would be shedding).
			codes := append(make([]int, 0, host.FirstsMin+2), 503, 200)
			for range host.FirstsMin {
				codes = append([]int{200}, codes...)
			}
			s := stubtest.New(stubtest.Deduping(codes, "Retry-After: 2")...)
			tr := NewTransport(s, WithBackoff(nil), WithRetryAfterMax(0))
			for range host.FirstsMin {
				require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
			}
			start := time.Now()
			require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
			assert.Equal(t, host.FirstsMin+2, len(s.Attempts()), "retried after the server's delay")
			assert.Equal(t, 2*time.Second, time.Since(start))
		})
	})
	t.Run("WithAttemptHeader(\"\") sends no attempt header on a retry", func(t *testing.T) {
		var got []string
		base := stubtest.New(func(req *http.Request) (*http.Response, error) {
			got = append(got, req.Header.Get(DefaultAttemptHeader))
			code := http.StatusServiceUnavailable
			if len(got) > 1 {
				code = http.StatusOK
			}
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		})
		tr := NewTransport(base, WithBackoff(nil), WithAttemptHeader(""))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		assert.Equal(t, []string{"", ""}, got, "retried, without the header")
	})
	t.Run("a budget alone is not capped by the tokens", func(t *testing.T) {
		s := stubtest.New(stubtest.Deduping([]int{503})...)
		tr := NewTransport(s, WithBackoff(nil), WithRetryControl(RetryBudget{Ratio: 1, MinPerSecond: -1}))
		for i := range 20 {
			// Distinct reads: the same one sent again would be a loop's
			// re-send (loopsite.go).
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://api.test/v1/items/%d", i), nil)
			require.Equal(t, 503, roundTrip(t, tr, req))
		}
		// One retry per first attempt: 20 first attempts and 20 retries.
		// The default tokens (3, then 2 % of first attempts) would have
		// allowed 3.
		assert.Equal(t, 40, len(s.Attempts()))
	})
	for _, tt := range []struct {
		name    string
		age     time.Duration
		expired bool
	}{
		{"WithKeyRetention(0): a key 23 h old is retried", 23 * time.Hour, false},
		{"WithKeyRetention(0): a key 25 h old is not", 25 * time.Hour, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := stubtest.New(stubtest.Deduping([]int{503, 201})...)
			tr := NewTransport(s, WithBackoff(nil), WithKeyRetention(0))
			rep := new(Report)
			ctx := ContextWithReport(ContextWithKey(context.Background(), keyMintedAt(time.Now().Add(-tt.age))), rep)
			resp, err := tr.RoundTrip(stubtest.Post(ctx, ""))
			require.NoError(t, err)
			resp.Body.Close()
			if tt.expired {
				assert.Equal(t, 503, resp.StatusCode)
				assert.ErrorIs(t, rep.Stopped, ErrKeyExpired)
				assert.Equal(t, 1, len(s.Attempts()), "the retry is not sent")
				return
			}
			assert.Equal(t, 201, resp.StatusCode)
			assert.Equal(t, 2, len(s.Attempts()))
		})
	}
}

// keyMintedAt returns a UUIDv7 key whose timestamp is t.
func keyMintedAt(t time.Time) string {
	u := uuid.Must(uuid.NewV7())
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[:6], ms[2:])
	return u.String()
}
