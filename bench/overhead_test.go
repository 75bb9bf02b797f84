package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
)

// payload is the body of the keyed POST: a small JSON object, as a payment
// API would get.
var payload = []byte(`{"amount":1000,"currency":"usd","source":"tok_visa"}`)

// stubTransport answers every request with a canned 200 and a tiny body,
// without touching the network: what remains is the cost of the client
// layers above it.
type stubTransport struct{}

func (stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	if req.URL.Path == largePath {
		return largeResponse(req), nil
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(`{"ok":true}`)),
		ContentLength: 11,
		Request:       req,
	}, nil
}

// getResumable names the GET of a body the resilient Transport can resume
// (a strong ETag, a length, Accept-Ranges: bytes): large, at largePath, so
// that its wrapper's cost per read shows.
const (
	getResumable = "resumable"
	largePath    = "/v1/large"
)

// large is the resumable body: 256 KiB.
var large = bytes.Repeat([]byte("0123456789abcdef"), 1<<14)

// largeResponse is the stub's answer to a GET of largePath, its body read
// as net/http's is: Read calls only (no WriteTo).
func largeResponse(req *http.Request) *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/octet-stream"}, "Etag": {`"v1"`},
			"Accept-Ranges": {"bytes"}, "Content-Length": {strconv.Itoa(len(large))}},
		Body:          io.NopCloser(struct{ io.Reader }{bytes.NewReader(large)}),
		ContentLength: int64(len(large)),
		Request:       req,
	}
}

// okHandler reads the request body and answers 200 with a tiny body, or
// with the large resumable one at largePath.
func okHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == largePath {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(large))
		return
	}
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"ok":true}`))
}

// client is one of the four clients compared.
type client struct {
	name string
	// new builds the client over base.
	new func(base http.RoundTripper) *http.Client
	// mintsKey is true when the client mints the Idempotency-Key itself;
	// for the others the benchmark sets one per request (minted the same
	// way, resilient.NewKey), so that every client sends a keyed POST.
	mintsKey bool
}

var clients = []client{
	{name: "nethttp", new: NetHTTP},
	{name: "resilient", new: func(base http.RoundTripper) *http.Client { return Resilient(base) }, mintsKey: true},
	{name: "retryablehttp", new: RetryableHTTP},
	{name: "failsafe", new: Failsafe},
}

// do sends one request with c and reads and closes the response; it stops
// the test on an error or a status other than 200.
func do(tb testing.TB, c *http.Client, method, url string, keyed bool) {
	if err := send(c, method, url, keyed); err != nil {
		tb.Fatal(err)
	}
}

// send is do returning the failure instead, for goroutines that may not
// stop the test (b.RunParallel's).
func send(c *http.Client, method, url string, keyed bool) error {
	var body io.Reader
	if method == http.MethodPost {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, body)
	if err != nil {
		return err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		if keyed {
			k, err := resilient.NewKey()
			if err != nil {
				return err
			}
			req.Header.Set(resilient.DefaultKeyHeader, k)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// bases returns the two base transports: the stub, and a loopback
// connection to an httptest server (closed by b.Cleanup).
func bases(b *testing.B) []struct {
	name string
	rt   func() http.RoundTripper
	url  string
} {
	srv := httptest.NewServer(http.HandlerFunc(okHandler))
	b.Cleanup(srv.Close)
	loopback := func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		b.Cleanup(t.CloseIdleConnections)
		return t
	}
	return []struct {
		name string
		rt   func() http.RoundTripper
		url  string
	}{
		{"stub", func() http.RoundTripper { return stubTransport{} }, "http://api.test"},
		{"loopback", loopback, srv.URL},
	}
}

// BenchmarkOverhead measures one request through each client, sequentially:
// BenchmarkOverhead/{stub,loopback}/{GET,POST,resumable}/{nethttp,resilient,
// retryablehttp,failsafe}. With the stub base transport the numbers are the
// pure overhead of each client; over loopback they include a real HTTP/1.1
// exchange with an httptest server on 127.0.0.1. The POST is keyed: resilient
// mints its key, the others get one per request from the benchmark loop (the
// same UUIDv7 function), so all four do the same work.
//
// resumable is a GET of a 256 KiB body that resilient can resume (a
// strong ETag, a length, Accept-Ranges: bytes), read to the end: the cost
// of its resumable wrapper.
func BenchmarkOverhead(b *testing.B) {
	for _, base := range bases(b) {
		for _, method := range []string{http.MethodGet, http.MethodPost, getResumable} {
			for _, c := range clients {
				b.Run(base.name+"/"+method+"/"+c.name, func(b *testing.B) {
					hc := c.new(base.rt())
					keyed := !c.mintsKey
					m, url := method, base.url+"/v1/charges"
					if method == getResumable {
						m, url = http.MethodGet, base.url+largePath
					}
					b.ReportAllocs()
					for b.Loop() {
						do(b, hc, m, url, keyed)
					}
				})
			}
		}
	}
}

// BenchmarkOverheadParallel is BenchmarkOverhead with GOMAXPROCS goroutines
// sharing one client (b.RunParallel): it shows contention in the clients'
// shared state (resilient's per-host budget and breaker, connection pools).
func BenchmarkOverheadParallel(b *testing.B) {
	for _, base := range bases(b) {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			for _, c := range clients {
				b.Run(base.name+"/"+method+"/"+c.name, func(b *testing.B) {
					hc := c.new(base.rt())
					keyed := !c.mintsKey
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							do(b, hc, method, base.url+"/v1/charges", keyed)
						}
					})
				})
			}
		}
	}
}

// TestClientsSendOneKeyedRequest checks what the benchmarks rely on: each
// client gets a 200 through each base, and the keyed POST reaches the server
// with exactly one Idempotency-Key.
func TestClientsSendOneKeyedRequest(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			got = append(got, strings.Join(r.Header.Values(resilient.DefaultKeyHeader), ","))
			mu.Unlock()
		}
		okHandler(w, r)
	}))
	defer srv.Close()
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			tr := http.DefaultTransport.(*http.Transport).Clone()
			defer tr.CloseIdleConnections()
			hc := c.new(tr)
			do(t, hc, http.MethodGet, srv.URL+"/v1/charges", false)
			do(t, hc, http.MethodPost, srv.URL+"/v1/charges", !c.mintsKey)
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || len(got[0]) != 36 || strings.Contains(got[0], ",") {
				t.Fatalf("keys seen by the server: %q, want one UUID", got)
			}
			do(t, c.new(stubTransport{}), http.MethodPost, "http://api.test/v1/charges", !c.mintsKey)
		})
	}
}
