package fakeserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

func ms(n int) fakeserver.Duration { return fakeserver.Duration(time.Duration(n) * time.Millisecond) }

func TestStatusFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault fakeserver.Fault
		check func(t *testing.T, r reply)
	}{
		{"503 with Retry-After seconds", fakeserver.Fault{Kind: fakeserver.FaultStatus, RetryAfter: ms(1500)}, func(t *testing.T, r reply) {
			assert.Equal(t, http.StatusServiceUnavailable, r.status)
			assert.Equal(t, "2", r.header.Get("Retry-After"))
		}},
		{"429 with Retry-After date", fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 429, RetryAfter: ms(3000), RetryAfterDate: true}, func(t *testing.T, r reply) {
			assert.Equal(t, http.StatusTooManyRequests, r.status)
			at, err := http.ParseTime(r.header.Get("Retry-After"))
			require.NoError(t, err)
			assert.WithinDuration(t, time.Now().Add(3*time.Second), at, 30*time.Second, "a date about 3 s ahead (a generous bound: CI is busy)")
		}},
		{"500 with headers", fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 500, Headers: map[string]string{"X-Should-Retry": "false"}}, func(t *testing.T, r reply) {
			assert.Equal(t, http.StatusInternalServerError, r.status)
			assert.Equal(t, "false", r.header.Get("X-Should-Retry"))
			assert.Empty(t, r.header.Get("Retry-After"))
		}},
	}
	for _, cn := range conns() {
		for _, tt := range tests {
			t.Run(cn.name+"/"+tt.name, func(t *testing.T) {
				s, c, base := cn.start(t)
				require.NoError(t, s.Enqueue("POST /v1/charges", tt.fault))
				r := mustDo(t, c, base, req{key: "k"})
				tt.check(t, r)
				assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
				assert.Contains(t, r.body, "/injected-fault")
				assert.Zero(t, s.TotalEffects())
				assert.EqualValues(t, 1, s.Stats().Faults["status"])
			})
		}
	}
}

func TestLatency(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultLatency, Latency: ms(150)}))
			start := time.Now()
			r := mustDo(t, c, base, req{key: "k"})
			assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
			assert.Equal(t, http.StatusCreated, r.status)
			assert.EqualValues(t, 1, s.Stats().Faults["latency"])
		})
	}
}

func TestHangUntilClientGivesUp(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultHang}))
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := do(t, c, base, req{key: "k", ctx: ctx})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), 30*time.Second, "bounded by the context, not by the hang (a generous bound: CI is busy)")

			// The hung request held the key in progress; once the server sees the
			// client gone it releases the key, and the retry executes.
			require.Eventually(t, func() bool { return s.Stats().InFlight == 0 }, 30*time.Second, 5*time.Millisecond)
			r := mustDo(t, c, base, req{key: "k"})
			assert.Equal(t, "stored", r.header.Get("Idempotency-Status"))
			assert.Equal(t, 1, s.TotalEffects())
			assert.EqualValues(t, 1, s.Stats().Faults["hang"])
		})
	}
}

func TestHangHoldsTheKeyInProgress(t *testing.T) {
	s, c, base := conns()[1].start(t)
	require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultHang}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := do(t, c, base, req{key: "k", ctx: ctx})
		done <- err
	}()
	require.Eventually(t, func() bool { return s.Stats().InFlight == 1 }, 30*time.Second, time.Millisecond)
	r := mustDo(t, c, base, req{key: "k"})
	assert.Equal(t, http.StatusConflict, r.status)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestResetBeforeEffect(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			if cn.name == "socket" {
				c = noKeepAlive(t)
			}
			require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultReset}))
			_, err := do(t, c, base, req{key: "k"})
			require.ErrorIs(t, err, syscall.ECONNRESET)
			var opErr *net.OpError
			require.ErrorAs(t, err, &opErr)
			assert.Zero(t, s.TotalEffects(), "a reset happens before the effect")

			r := mustDo(t, c, base, req{key: "k"})
			assert.Equal(t, "stored", r.header.Get("Idempotency-Status"), "the reset released the key")
			assert.Equal(t, 1, s.TotalEffects())
			assert.EqualValues(t, 1, s.Stats().Faults["reset"])
		})
	}
}

func TestLostResponseAfterCommit(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			if cn.name == "socket" {
				c = noKeepAlive(t) // a fresh connection: net/http will not re-send silently
			}
			require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultLostResponse}))
			_, err := do(t, c, base, req{key: "k"})
			require.Error(t, err, "the client sees a connection error")
			if cn.name == "in-process" {
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			}
			led := s.Ledger()
			require.Len(t, led, 1, "the effect was committed")
			assert.Equal(t, "k", led[0].Key)

			r := mustDo(t, c, base, req{key: "k"})
			assert.Equal(t, http.StatusCreated, r.status)
			assert.Equal(t, "replayed", r.header.Get("Idempotency-Status"))
			var obj struct{ ID string }
			require.NoError(t, json.Unmarshal([]byte(r.body), &obj))
			assert.Equal(t, led[0].ID, obj.ID)
			assert.Equal(t, 1, s.TotalEffects())
			assert.EqualValues(t, 1, s.Stats().Faults["lost_response"])
		})
	}
}

func TestSlowBody(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultSlowBody, BodyDuration: ms(300)}))
			hr, err := http.NewRequest(http.MethodPost, base+"/v1/charges", strings.NewReader(`{"amount":1}`))
			require.NoError(t, err)
			start := time.Now()
			resp, err := c.Do(hr)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "the body trickles")
			assert.True(t, json.Valid(b))
			assert.EqualValues(t, 1, s.Stats().Faults["slow_body"])
		})
	}
}

func TestSlowBodyHonoursContext(t *testing.T) {
	s, c, base := conns()[1].start(t)
	require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultSlowBody, BodyDuration: ms(5000)}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := do(t, c, base, req{ctx: ctx})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestTruncatedBody(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			if cn.name == "socket" {
				c = noKeepAlive(t)
			}
			require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultTruncatedBody}))
			r, err := do(t, c, base, req{key: "k"})
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Equal(t, http.StatusCreated, r.status)
			assert.NotEmpty(t, r.body)
			n, _ := strconv.Atoi(r.header.Get("Content-Length"))
			assert.Less(t, len(r.body), n)

			full := mustDo(t, c, base, req{key: "k"})
			assert.True(t, strings.HasPrefix(full.body, r.body))
			assert.Equal(t, "replayed", full.header.Get("Idempotency-Status"))
			assert.Equal(t, 1, s.TotalEffects())
		})
	}
}

func TestMalformedBody(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultMalformedBody}))
			r := mustDo(t, c, base, req{key: "k"})
			assert.Equal(t, http.StatusCreated, r.status)
			assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			assert.False(t, json.Valid([]byte(r.body)), r.body)
			assert.Equal(t, strconv.Itoa(len(r.body)), r.header.Get("Content-Length"))

			good := mustDo(t, c, base, req{key: "k"})
			assert.True(t, json.Valid([]byte(good.body)), "the stored response is intact")
			assert.Equal(t, 1, s.TotalEffects())
		})
	}
}

func TestOutageWindow(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			clk := newClock()
			s, c, base := cn.start(t, fakeserver.WithClock(clk.Now), fakeserver.WithOutage(fakeserver.Outage{
				Start: ms(10_000), End: ms(20_000), RetryAfter: ms(2000),
			}))
			steps := []struct {
				advance time.Duration
				status  int
			}{
				{5 * time.Second, http.StatusCreated},
				{5 * time.Second, http.StatusServiceUnavailable},
				{9 * time.Second, http.StatusServiceUnavailable},
				{time.Second, http.StatusCreated},
			}
			for i, st := range steps {
				clk.Advance(st.advance)
				r := mustDo(t, c, base, req{key: strconv.Itoa(i)})
				assert.Equal(t, st.status, r.status, "step %d", i)
				if st.status == http.StatusServiceUnavailable {
					assert.Equal(t, "2", r.header.Get("Retry-After"))
					assert.Contains(t, r.body, "/outage")
				}
			}
			assert.EqualValues(t, 2, s.Stats().Faults["outage"])
			assert.Equal(t, 2, s.TotalEffects())
		})
	}
}

func TestFailureRate(t *testing.T) {
	tests := []struct {
		rate     float64
		status   int
		wantFail int
	}{
		{0, 0, 0},
		{1, 0, 20},
		{1, 502, 20},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatFloat(tt.rate, 'g', -1, 64)+"/"+strconv.Itoa(tt.status), func(t *testing.T) {
			s, c, base := conns()[1].start(t, fakeserver.WithRoute(fakeserver.Route{
				Match: "POST /v1/{collection}", FailureRate: tt.rate, FailureStatus: tt.status,
			}))
			want := tt.status
			if want == 0 {
				want = http.StatusServiceUnavailable // the default
			}
			fails := 0
			for i := range 20 {
				r := mustDo(t, c, base, req{key: strconv.Itoa(i)})
				if r.status != http.StatusCreated {
					fails++
					assert.Equal(t, want, r.status)
				}
			}
			assert.Equal(t, tt.wantFail, fails)
			assert.Equal(t, 20-tt.wantFail, s.TotalEffects(), "failures happen before the effect")
		})
	}
}

func TestCapacitySheds(t *testing.T) {
	tests := []struct {
		name         string
		capacity     fakeserver.Capacity
		wantOK, shed int
	}{
		{"no queue", fakeserver.Capacity{MaxConcurrent: 2, ServiceTime: ms(300), RetryAfter: ms(1000)}, 2, 3},
		{"queue of one", fakeserver.Capacity{MaxConcurrent: 2, ServiceTime: ms(300), Queue: 1, RetryAfter: ms(1000)}, 3, 2},
		{"queue timeout", fakeserver.Capacity{MaxConcurrent: 1, ServiceTime: ms(300), Queue: 10, QueueTimeout: ms(50), RetryAfter: ms(1000)}, 1, 4},
	}
	for _, cn := range conns() {
		for _, tt := range tests {
			t.Run(cn.name+"/"+tt.name, func(t *testing.T) {
				s, c, base := cn.start(t, fakeserver.WithCapacity(tt.capacity))
				const n = 5
				replies := make([]reply, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() { replies[i] = mustDo(t, c, base, req{key: strconv.Itoa(i)}) })
				}
				wg.Wait()
				ok, shed := 0, 0
				for _, r := range replies {
					switch r.status {
					case http.StatusCreated:
						ok++
					case http.StatusServiceUnavailable:
						shed++
						assert.Equal(t, "1", r.header.Get("Retry-After"))
						assert.Contains(t, r.body, "/over-capacity")
					default:
						t.Errorf("unexpected status %d", r.status)
					}
				}
				assert.Equal(t, tt.wantOK, ok)
				assert.Equal(t, tt.shed, shed)
				assert.EqualValues(t, tt.shed, s.Stats().CapacityRejections)
				assert.Equal(t, tt.wantOK, s.TotalEffects())
			})
		}
	}
}

// outcomes sends n keyed requests in order and lists what each got.
func outcomes(t *testing.T, s *fakeserver.Server, n int) []string {
	c := &http.Client{Transport: s.Transport()}
	var out []string
	for i := range n {
		r, err := do(t, c, inProcessURL, req{key: strconv.Itoa(i)})
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			out = append(out, "reset")
		case err != nil:
			out = append(out, "error")
		default:
			out = append(out, strconv.Itoa(r.status))
		}
	}
	return out
}

func TestScriptsAreDeterministic(t *testing.T) {
	route := fakeserver.Route{
		Match: "POST /v1/charges",
		Script: []fakeserver.Fault{
			{Kind: fakeserver.FaultStatus, Status: 503, Count: 2},
			{Kind: fakeserver.FaultStatus, Status: 429},
			{Kind: fakeserver.FaultNone},
			{Kind: fakeserver.FaultReset},
		},
		FailureRate: 0.2,
		Mix: []fakeserver.Fault{
			{Kind: fakeserver.FaultStatus, Status: 500, Probability: 0.1},
			{Kind: fakeserver.FaultReset, Probability: 0.1},
		},
	}
	run := func(seed uint64) []string {
		s := fakeserver.NewUnstarted(fakeserver.WithSeed(seed), fakeserver.WithRoute(route))
		defer s.Close()
		return outcomes(t, s, 60)
	}
	a, b, other := run(7), run(7), run(8)
	assert.Equal(t, []string{"503", "503", "429", "201", "reset"}, a[:5], "the script comes first, in order")
	assert.Equal(t, a, b, "same seed, same outcomes")
	assert.NotEqual(t, a, other, "another seed, other outcomes")
	counts := map[string]int{}
	for _, o := range a[5:] {
		counts[o]++
	}
	assert.Positive(t, counts["503"])
	assert.Positive(t, counts["201"])
	assert.Positive(t, counts["reset"]+counts["500"])
}

func TestResetRestartsScripts(t *testing.T) {
	s := fakeserver.NewUnstarted(fakeserver.WithRoute(fakeserver.Route{
		Match: "*", Script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 503}},
	}))
	defer s.Close()
	require.NoError(t, s.Enqueue("*", fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 502}))
	assert.Equal(t, []string{"503", "502", "201"}, outcomes(t, s, 3))
	s.Reset()
	assert.Equal(t, []string{"503", "201"}, outcomes(t, s, 2), "Reset drops enqueued outcomes and restarts the script")
	st := s.Stats()
	assert.EqualValues(t, 2, st.Requests)
	assert.Equal(t, 1, st.Effects)
}
