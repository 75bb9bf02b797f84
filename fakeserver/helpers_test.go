package fakeserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

// inProcessURL is the base URL used with the in-process transport (its host is
// ignored).
const inProcessURL = "http://fakeserver.invalid"

// conn is one way of reaching a server in a test: over loopback or in-process.
type conn struct {
	name  string
	start func(t *testing.T, opts ...fakeserver.Option) (*fakeserver.Server, *http.Client, string)
}

// conns lists both ways; most tests run under each.
func conns() []conn {
	return []conn{
		{"socket", func(t *testing.T, opts ...fakeserver.Option) (*fakeserver.Server, *http.Client, string) {
			s := fakeserver.New(opts...)
			t.Cleanup(s.Close)
			return s, s.Client(), s.URL
		}},
		{"in-process", func(t *testing.T, opts ...fakeserver.Option) (*fakeserver.Server, *http.Client, string) {
			s := fakeserver.NewUnstarted(opts...)
			t.Cleanup(s.Close)
			return s, &http.Client{Transport: s.Transport()}, inProcessURL
		}},
	}
}

// reply is a response read in full.
type reply struct {
	status int
	header http.Header
	body   string
}

// req describes a request for do.
type req struct {
	method  string // default POST
	path    string // default /v1/charges
	key     string // Idempotency-Key, verbatim; "" for none
	body    string // default {"amount":100}
	auth    string
	headers map[string]string
	ctx     context.Context
}

// do sends r and reads the whole response; err is the transport's or the
// body's error.
func do(t *testing.T, c *http.Client, base string, r req) (reply, error) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/v1/charges"
	}
	if r.body == "" && r.method == http.MethodPost {
		r.body = `{"amount":100}`
	}
	if r.ctx == nil {
		r.ctx = context.Background()
	}
	hr, err := http.NewRequestWithContext(r.ctx, r.method, base+r.path, strings.NewReader(r.body))
	require.NoError(t, err)
	if r.body == "" {
		hr.Body, hr.GetBody, hr.ContentLength = http.NoBody, nil, 0
	}
	hr.Header.Set("Content-Type", "application/json")
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	if r.auth != "" {
		hr.Header.Set("Authorization", r.auth)
	}
	for k, v := range r.headers {
		hr.Header.Set(k, v)
	}
	resp, err := c.Do(hr)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// mustDo is do that fails the test on a transport error.
func mustDo(t *testing.T, c *http.Client, base string, r req) reply {
	t.Helper()
	rep, err := do(t, c, base, r)
	require.NoError(t, err)
	return rep
}

// clock is a manual clock for WithClock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// noKeepAlive returns a client that opens a new connection per request, so
// net/http never silently re-sends a request on a dead keep-alive connection.
func noKeepAlive(t *testing.T) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
