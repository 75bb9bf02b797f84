package resilient_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// budgetSeen is what a server saw of one request: its X-Request-Timeout
// header(s) and the time left before the caller's deadline on arrival.
type budgetSeen struct {
	header []string
	left   time.Duration
}

// budgetRun sends one request of method with the given options in a
// synctest bubble, to a server that answers 503 after a pause, except the
// last of attempts, and returns what the server saw of each attempt.
// Virtual time stands still while a request crosses the in-memory
// network, so arrival is send time. deadline 0: no deadline.
func budgetRun(t *testing.T, method string, deadline time.Duration, set http.Header, opts ...resilient.Option) []budgetSeen {
	t.Helper()
	return budgetRunClient(t, method, deadline, 0, set, opts...)
}

// budgetRunClient is budgetRun with an http.Client whose Timeout is
// timeout (0: none), a deadline of its own.
func budgetRunClient(t *testing.T, method string, deadline, timeout time.Duration, set http.Header, opts ...resilient.Option) []budgetSeen {
	t.Helper()
	var seen []budgetSeen
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		var dl time.Time
		if deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, deadline)
			defer cancel()
			dl, _ = ctx.Deadline()
		}
		if timeout > 0 && (dl.IsZero() || time.Now().Add(timeout).Before(dl)) {
			dl = time.Now().Add(timeout)
		}
		var mu sync.Mutex
		n := newPipeNet(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			mu.Lock()
			s := budgetSeen{header: r.Header.Values("X-Request-Timeout")}
			if !dl.IsZero() {
				s.left = time.Until(dl)
			}
			seen = append(seen, s)
			last := len(seen) == 3
			mu.Unlock()
			time.Sleep(70 * time.Millisecond) // the attempt's own time
			if last {
				io.WriteString(w, "ok")
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		defer n.close()
		opts = append([]resilient.Option{resilient.WithBackoff(resilient.Exponential(30*time.Millisecond, time.Second))}, opts...)
		c := &http.Client{Transport: resilient.NewTransport(n.tr, opts...), Timeout: timeout}
		req, err := http.NewRequestWithContext(ctx, method, "http://api.test/v1/things", strings.NewReader("x"))
		require.NoError(t, err)
		for k, vs := range set {
			req.Header[k] = vs
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})
	return seen
}

// ms is d in whole milliseconds, as the header says it.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// Each attempt carries the caller's remaining time when it is sent: a
// GET (unkeyed), a PUT with the caller's key, and a POST with a minted
// key, retried after 503s (the POST's server is declared to dedupe).
func TestTimeBudgetHeaderEachAttempt(t *testing.T) {
	for _, tc := range []struct {
		method string
		set    http.Header
	}{
		{http.MethodGet, nil},
		{http.MethodPut, http.Header{"Idempotency-Key": {"caller-key-1"}}},
		{http.MethodPost, nil},
	} {
		t.Run(tc.method, func(t *testing.T) {
			seen := budgetRun(t, tc.method, 2*time.Second, tc.set, resilient.WithTimeBudgetHeader(), resilient.WithDedupingServer("api.test"))
			require.Len(t, seen, 3)
			for i, s := range seen {
				assert.Equal(t, []string{ms(s.left)}, s.header, "attempt %d", i)
			}
			assert.Equal(t, []string{"2000"}, seen[0].header, "the first attempt has the whole budget")
			assert.Less(t, seen[2].left, seen[1].left)
		})
	}
}

// http.Client.Timeout is a deadline of the request's, and so a budget.
func TestTimeBudgetHeaderClientTimeout(t *testing.T) {
	seen := budgetRunClient(t, http.MethodGet, 0, 1500*time.Millisecond, nil, resilient.WithTimeBudgetHeader())
	require.Len(t, seen, 3)
	for i, s := range seen {
		assert.Equal(t, []string{ms(s.left)}, s.header, "attempt %d", i)
	}
	assert.Equal(t, []string{"1500"}, seen[0].header)
}

// An attempt timeout shorter than what is left is the attempt's budget.
func TestTimeBudgetHeaderAttemptTimeout(t *testing.T) {
	seen := budgetRun(t, http.MethodGet, 320*time.Millisecond, nil, resilient.WithTimeBudgetHeader(), resilient.WithAttemptTimeout(100*time.Millisecond))
	require.Len(t, seen, 3)
	for i, s := range seen {
		want := min(100*time.Millisecond, s.left)
		assert.Equal(t, []string{ms(want)}, s.header, "attempt %d", i)
	}
	assert.Equal(t, []string{"100"}, seen[0].header)
	assert.Less(t, seen[2].left, 100*time.Millisecond, "the last attempt has less than the attempt timeout left")

	noDeadline := budgetRun(t, http.MethodGet, 0, nil, resilient.WithTimeBudgetHeader(), resilient.WithAttemptTimeout(100*time.Millisecond))
	for i, s := range noDeadline {
		assert.Equal(t, []string{"100"}, s.header, "attempt %d: the attempt timeout alone", i)
	}
}

// No header without a deadline, none by default, and a header the caller
// set is sent as it is.
func TestTimeBudgetHeaderNone(t *testing.T) {
	for name, tc := range map[string]struct {
		deadline time.Duration
		set      http.Header
		opts     []resilient.Option
		want     []string
	}{
		"no deadline":       {0, nil, []resilient.Option{resilient.WithTimeBudgetHeader()}, nil},
		"off by default":    {time.Second, nil, nil, nil},
		"caller's header":   {time.Second, http.Header{"X-Request-Timeout": {"5"}}, []resilient.Option{resilient.WithTimeBudgetHeader()}, []string{"5"}},
		"caller's spelling": {time.Second, http.Header{"x-request-timeout": {"5"}}, []resilient.Option{resilient.WithTimeBudgetHeader()}, []string{"5"}},
	} {
		t.Run(name, func(t *testing.T) {
			seen := budgetRun(t, http.MethodGet, tc.deadline, tc.set, tc.opts...)
			require.Len(t, seen, 3)
			for i, s := range seen {
				assert.Equal(t, tc.want, s.header, "attempt %d", i)
			}
		})
	}
}
