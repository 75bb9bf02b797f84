package resilient_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
)

// fateServer is a base transport whose answers are a pure function of the
// operation and the attempt: attempt k of operation i fails (503) when
// hash(i, k) < p. Every client therefore meets the same fate on its k-th
// attempt of an operation, and "did the SDK do harm" becomes an exact
// question: did it fail an operation that a single attempt completes?
type fateServer struct {
	p       float64
	latency time.Duration
	sent    atomic.Int64
	mu      sync.Mutex
	seen    map[string]int // operation → attempts seen
}

func fails(op string, k int, p float64) bool {
	h := fnv.New64a()
	io.WriteString(h, op)
	x := h.Sum64() ^ uint64(k)*0x9e3779b97f4a7c15
	// splitmix64's finalizer: FNV alone barely changes its high bits when
	// only the attempt number changes.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/(1<<53) < p
}

func (s *fateServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	s.sent.Add(1)
	op := req.Header.Get("X-Op")
	s.mu.Lock()
	k := s.seen[op]
	s.seen[op] = k + 1
	s.mu.Unlock()
	time.Sleep(s.latency)
	code := http.StatusCreated
	if fails(op, k, s.p) {
		code = http.StatusServiceUnavailable
	}
	h := http.Header{"Idempotency-Key": {stubtest.Wire(req.Header).Get("Idempotency-Key")}} // it dedupes, and says so
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
}

// harmRun is one client population against one fateServer.
type harmRun struct {
	ok   map[int]bool // operation → completed
	load float64      // attempts ÷ operations
}

// runFates sends ops operations (keyed POSTs) at rate per second, spread
// over clients Transports (one shared Transport when clients is 1), each
// operation with a 5 s deadline, and reports which completed.
func runFates(t *testing.T, p float64, ops, clients int, rate float64, opts ...resilient.Option) harmRun {
	t.Helper()
	return runFatesMethod(t, http.MethodPost, p, ops, clients, rate, opts...)
}

// runFatesMethod is runFates with operations of the given method: POSTs
// create a charge, other methods read one (GETs are what hedging applies
// to).
func runFatesMethod(t *testing.T, method string, p float64, ops, clients int, rate float64, opts ...resilient.Option) harmRun {
	t.Helper()
	var out harmRun
	synctest.Test(t, func(t *testing.T) {
		srv := &fateServer{p: p, latency: 20 * time.Millisecond, seen: make(map[string]int)}
		trs := make([]*resilient.Transport, clients)
		for i := range trs {
			trs[i] = resilient.NewTransport(srv, opts...)
		}
		ok := make([]bool, ops)
		gap := time.Duration(float64(time.Second) / rate)
		var wg sync.WaitGroup
		for i := range ops {
			tr := trs[i%clients]
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var req *http.Request
				if method == http.MethodPost {
					req, _ = http.NewRequestWithContext(ctx, method, "http://api.test/v1/charges", strings.NewReader("{}"))
				} else {
					req, _ = http.NewRequestWithContext(ctx, method, "http://api.test/v1/charges/1", nil)
				}
				req.Header.Set("X-Op", strconv.Itoa(i))
				resp, err := tr.RoundTrip(req)
				if err == nil {
					ok[i] = resp.StatusCode == http.StatusCreated
					resp.Body.Close()
				}
			})
			time.Sleep(gap)
		}
		wg.Wait()
		out.ok = make(map[int]bool, ops)
		for i, v := range ok {
			if v {
				out.ok[i] = true
			}
		}
		out.load = float64(srv.sent.Load()) / float64(ops)
	})
	return out
}

// TestDefaultsDoNoHarm is the storm's do-no-harm property in virtual time,
// at both scales (one shared Transport; 25 clients of 10 ops/s with one
// Transport each): with default options, no operation that a single attempt
// completes fails; retries help when failures are rare; load stays bounded
// when everything fails.
func TestDefaultsDoNoHarm(t *testing.T) {
	const ops = 4000
	scales := []struct {
		name    string
		clients int
		rate    float64
	}{
		{"shared", 1, 250},
		{"small clients", 25, 250},
	}
	for _, sc := range scales {
		for _, p := range []float64{0.1, 0.3, 0.5, 0.9, 1} {
			t.Run(fmt.Sprintf("%s/p=%.1f", sc.name, p), func(t *testing.T) {
				t.Parallel()
				none := runFates(t, p, ops, sc.clients, sc.rate, resilient.WithMaxAttempts(1))
				def := runFates(t, p, ops, sc.clients, sc.rate)
				harm := 0
				for i := range none.ok {
					if !def.ok[i] {
						harm++
					}
				}
				assert.Zero(t, harm, "operations a single attempt completes that the defaults failed")
				success := float64(len(def.ok)) / ops
				t.Logf("none %.2f %% at load %.3f; defaults %.2f %% at load %.3f",
					100*float64(len(none.ok))/ops, none.load, 100*success, def.load)
				switch p {
				case 0.1:
					assert.GreaterOrEqual(t, success, 0.999, "retries help when failures are rare")
					assert.LessOrEqual(t, def.load, 1.12)
				case 1:
					assert.LessOrEqual(t, def.load, 1.05, "load bounded when everything fails")
				}
			})
		}
	}
}
