package resilient

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"
	"github.com/resilienthttp/resilient/internal/stubtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowBase answers each request with the next status of codes after the
// next delay of delays (the last of each repeats).
type slowBase struct {
	mu     sync.Mutex
	codes  []int
	delays []time.Duration
	n      int
}

func (s *slowBase) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	code, d := s.codes[min(s.n, len(s.codes)-1)], s.delays[min(s.n, len(s.delays)-1)]
	s.n++
	s.mu.Unlock()
	time.Sleep(d)
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

func get(t *testing.T, tr *Transport, ctx context.Context) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
}

// TestLatencyAverage: with the defaults, every attempt feeds the host's
// latency average, retries included, whatever its outcome; a request with
// a Report is timed, and so is every attempt when an Observer or a custom
// Classifier is set.
func TestLatencyAverage(t *testing.T) {
	ms := time.Millisecond
	t.Run("every operation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// 10 ms, then a 90 ms 503, then a 50 ms success.
			base := &slowBase{codes: []int{200, 503, 200}, delays: []time.Duration{10 * ms, 90 * ms, 50 * ms}}
			tr := NewTransport(base, WithMaxAttempts(1))
			h := func() *host.State { v, _ := tr.hosts.M.Load("api.test"); return v.(*host.State) }
			get(t, tr, context.Background())
			assert.Equal(t, int64(10*ms), h().Latency.Avg.Load(), "the host's first request is timed")
			get(t, tr, context.Background()) // the 503 is the answer: one attempt
			assert.Equal(t, int64(20*ms), h().Latency.Avg.Load(), "a failure is timed: 10 + (90-10)/8")
			get(t, tr, context.Background())
			assert.Equal(t, int64(23750*time.Microsecond), h().Latency.Avg.Load(), "a success is timed: 20 + (50-20)/8")
		})
	})
	t.Run("retries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// op 1: 10 ms. op 2: a 502 then a 200, 90 ms each: both
			// attempts feed the average.
			codes := []int{200, 502, 200}
			delays := []time.Duration{10 * ms, 90 * ms, 90 * ms}
			tr := NewTransport(&slowBase{codes: codes, delays: delays}, WithBackoff(nil))
			h := func() *host.State { v, _ := tr.hosts.M.Load("api.test"); return v.(*host.State) }
			get(t, tr, context.Background())
			get(t, tr, context.Background())
			assert.Equal(t, int64(28750*time.Microsecond), h().Latency.Avg.Load(), "op 2's two attempts: 10 → 20 → 28.75 ms")
		})
	})
	t.Run("report", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := NewTransport(&slowBase{codes: []int{200}, delays: []time.Duration{30 * ms}})
			for range 3 {
				var rep Report
				get(t, tr, ContextWithReport(context.Background(), &rep))
				require.Len(t, rep.Attempts, 1)
				assert.Equal(t, 30*ms, rep.Attempts[0].Duration)
			}
		})
	})
	t.Run("observer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var durations []time.Duration
			obs := func(_ context.Context, e Event) {
				if e.Kind == EventAttempt {
					durations = append(durations, e.Attempt.Duration)
				}
			}
			tr := NewTransport(&slowBase{codes: []int{200}, delays: []time.Duration{30 * ms}}, WithObserver(obs))
			for range 3 {
				get(t, tr, context.Background())
			}
			assert.Equal(t, []time.Duration{30 * ms, 30 * ms, 30 * ms}, durations)
		})
	})
	t.Run("custom classifier", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var late []time.Duration
			var sent time.Time
			cl := func(o Outcome) Decision {
				late = append(late, o.Now.Sub(sent))
				return DefaultClassifier(o)
			}
			tr := NewTransport(&slowBase{codes: []int{200}, delays: []time.Duration{30 * ms}}, WithClassifier(cl))
			for range 3 {
				sent = time.Now()
				get(t, tr, context.Background())
			}
			assert.Equal(t, []time.Duration{30 * ms, 30 * ms, 30 * ms}, late, "Outcome.Now is when the answer came")
		})
	})
}

// A retry whose wait fits before the deadline but whose attempt, at the
// host's usual latency, would not, is not started: the caller gets the
// real answer at once.
func TestRetryNotStartedWhenTheAttemptCannotFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			time.Sleep(2 * time.Second)
			return stubtest.New(stubtest.Deduping([]int{503})...).RoundTrip(req)
		})
		tr := NewTransport(slow, WithBackoff(Exponential(100*time.Millisecond, 100*time.Millisecond)))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		rep := new(Report)
		resp, err := tr.RoundTrip(stubtest.Post(ContextWithReport(ctx, rep), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, rep.Attempts, 1)
		assert.ErrorIs(t, rep.Stopped, ErrDelayTooLong)
	})
}
