package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
)

// load is one run of concurrent operations against the fake server's API,
// bounded in count (ops) and in time (maxTime).
type load struct {
	// url is the API's base URL as the client sees it: the fake server, a
	// toxiproxy proxy or nginx.
	url string
	// ops is the number of operations to run (twins count as two);
	// concurrency is the number of workers.
	ops, concurrency int
	// maxTime stops the workers from starting operations after it; the
	// operations in flight finish (each within opTimeout).
	maxTime time.Duration
	// opTimeout is each operation's deadline (default 10 s).
	opTimeout time.Duration
	// pace is how long a worker waits between two of its operations.
	pace time.Duration
	// twins sends each operation twice at once, from two goroutines, with one
	// caller-chosen key: duplicate in-flight attempts of one operation.
	twins bool
	// fresh makes every attempt open a new connection (no keep-alive), so
	// that a fault drawn per connection, like a toxiproxy toxic's toxicity,
	// is drawn for every attempt.
	fresh bool
	// options configure the client's resilient.Transport.
	options []resilient.Option
	// bare sends the operations with the base client alone, without the
	// SDK (options unused): what the SDK is compared with.
	bare bool
	// during, if set, runs while the operations do (it must return when ctx
	// is done).
	during func(ctx context.Context)
}

// result is what the caller of one operation saw.
type result struct {
	op     int
	key    string // the idempotency key sent
	status int    // the final status; 0 with err
	err    error  // what http.Client.Do returned
	// inProgress: a final 409 whose problem code is idempotency.in_progress.
	inProgress bool
	// bodyErr is the error reading the final response's body, if any.
	bodyErr error
	// objectID is the "id" of a 2xx body that was read and decoded.
	objectID string
	report   resilient.Report
}

// run runs l and returns one result per operation started, in operation
// order, and how long it took.
func (l load) run(t *testing.T) ([]result, time.Duration) {
	t.Helper()
	if l.opTimeout == 0 {
		l.opTimeout = 10 * time.Second
	}
	base := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2 * l.concurrency,
		IdleConnTimeout:     30 * time.Second,
		DisableKeepAlives:   l.fresh,
	}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: base}
	if !l.bare {
		client = resilient.Wrap(client, l.options...)
	}

	results := make([]result, l.ops)
	var next atomic.Int64
	step := int64(1)
	if l.twins {
		step = 2
	}
	start := time.Now()
	stop := start.Add(l.maxTime)
	ctx, cancel := context.WithCancel(context.Background())
	var during sync.WaitGroup
	if l.during != nil {
		during.Go(func() { l.during(ctx) })
	}
	var wg sync.WaitGroup
	for range l.concurrency {
		wg.Go(func() {
			for time.Now().Before(stop) {
				i := int(next.Add(step) - step)
				if i+int(step) > l.ops {
					return
				}
				if !l.twins {
					results[i] = l.do(client, i, i, "")
				} else {
					key, err := resilient.NewKey()
					if err != nil {
						panic(err)
					}
					var pair sync.WaitGroup
					pair.Go(func() { results[i] = l.do(client, i, i, key) })
					pair.Go(func() { results[i+1] = l.do(client, i+1, i, key) })
					pair.Wait()
				}
				if l.pace > 0 {
					time.Sleep(l.pace)
				}
			}
		})
	}
	wg.Wait()
	cancel()
	during.Wait()
	elapsed := time.Since(start)
	done := min(int(next.Load()), l.ops)
	return results[:done], elapsed
}

// chargeBody is the body of operation n: twins send the same one.
func chargeBody(n int) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"usd","op":%d}`, 100+n, n)
}

// do runs operation i (with the body of operation body), with the caller's
// key if key is not empty, else the Transport's.
func (l load) do(client *http.Client, i, body int, key string) result {
	ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout)
	defer cancel()
	r := result{op: i, key: key}
	ctx = resilient.ContextWithReport(ctx, &r.report)
	if key != "" {
		ctx = resilient.ContextWithKey(ctx, key)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url+"/v1/charges", strings.NewReader(chargeBody(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	r.err = err
	if r.report.Key != "" {
		r.key = r.report.Key
	}
	if resp == nil {
		return r
	}
	r.status = resp.StatusCode
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	r.bodyErr = err
	switch {
	case r.status == http.StatusConflict:
		r.inProgress = bytes.Contains(b, []byte(`"idempotency.in_progress"`))
	case r.status >= 200 && r.status < 300 && err == nil:
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &obj) == nil {
			r.objectID = obj.ID
		}
	}
	return r
}
