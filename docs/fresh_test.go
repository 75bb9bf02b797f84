package docs_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
)

// script is a server that answers each request with the next answer of
// its list (the last one repeated): a status, a status with Retry-After,
// or a connection reset after the request was read.
type script struct {
	mu   sync.Mutex
	list []answer
	sent int
}

type answer struct {
	code       int    // 0: a reset
	retryAfter string // the Retry-After header, if any
}

func (s *script) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil { // read all of it: the request was sent
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{}) // as net/http says once it wrote it
	}
	s.mu.Lock()
	a := s.list[min(s.sent, len(s.list)-1)]
	s.sent++
	s.mu.Unlock()
	if a.code == 0 {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	h := http.Header{}
	if a.retryAfter != "" {
		h.Set("Retry-After", a.retryAfter)
	}
	return &http.Response{StatusCode: a.code, Header: h, Body: http.NoBody, Request: req}, nil
}

var (
	answerCell = regexp.MustCompile("^(reset|\\d{3})(?: \\+ `Retry-After: (\\d+)`)?$")
	deadline   = regexp.MustCompile(`, (\d+) (ms|s) deadline`)
	after      = regexp.MustCompile(`^(?:(0)|(\d+) s|< (\d+) ms \(backoff\))$`)
)

// freshRow is a row of the table of docs/defaults.md's "What a fresh
// client does with each answer", parsed.
type freshRow struct {
	method   string
	dedupes  bool
	deadline time.Duration
	answers  []answer
	status   int // 0: an error (the reset)
	sent     int
	exact    time.Duration // the time until the answer, when exact
	below    time.Duration // else: less than this (a backoff's jitter)
}

func parseFreshRow(t *testing.T, cells []string) freshRow {
	t.Helper()
	require.Len(t, cells, 5, "%q", cells)
	r := freshRow{deadline: 10 * time.Second}
	r.method, _, _ = strings.Cut(cells[0], " ")
	r.method = strings.TrimSuffix(r.method, ",")
	require.Contains(t, []string{"GET", "POST"}, r.method, "%q", cells[0])
	r.dedupes = strings.Contains(cells[0], "declared deduping server")
	require.True(t, r.method == "GET" || r.dedupes || strings.Contains(cells[0], "no evidence"), "%q: say which POST", cells[0])
	if m := deadline.FindStringSubmatch(cells[0]); m != nil {
		n, _ := strconv.Atoi(m[1])
		r.deadline = time.Duration(n) * map[string]time.Duration{"ms": time.Millisecond, "s": time.Second}[m[2]]
	}
	for _, c := range strings.Split(cells[1], ", ") {
		m := answerCell.FindStringSubmatch(c)
		require.NotNil(t, m, "answer %q", c)
		var a answer
		if m[1] != "reset" {
			a.code, _ = strconv.Atoi(m[1])
		}
		a.retryAfter = m[2]
		r.answers = append(r.answers, a)
	}
	if cells[2] != "error (the reset)" {
		var err error
		r.status, err = strconv.Atoi(cells[2])
		require.NoError(t, err, "the caller gets %q", cells[2])
	}
	var err error
	r.sent, err = strconv.Atoi(cells[3])
	require.NoError(t, err)
	m := after.FindStringSubmatch(cells[4])
	require.NotNil(t, m, "after %q", cells[4])
	switch {
	case m[2] != "":
		n, _ := strconv.Atoi(m[2])
		r.exact = time.Duration(n) * time.Second
	case m[3] != "":
		n, _ := strconv.Atoi(m[3])
		r.below = time.Duration(n) * time.Millisecond
	}
	return r
}

// TestFreshClientTable runs every row of docs/defaults.md's table of what a
// fresh client does with each answer: a client with the defaults (Wrap of
// a client over the row's server: NewClient's Transport over another base),
// on a cold host, in virtual time. So the table says what the code does.
func TestFreshClientTable(t *testing.T) {
	rows := table(t, read(t, "docs/defaults.md"), "## What a fresh client does with each answer")
	require.GreaterOrEqual(t, len(rows), 12)
	for _, cells := range rows {
		r := parseFreshRow(t, cells)
		t.Run(strings.Join(cells[:2], ": "), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &script{list: r.answers}
				var opts []resilient.Option
				if r.dedupes {
					opts = append(opts, resilient.WithDedupingServer("api.test"))
				}
				c := resilient.Wrap(&http.Client{Transport: srv}, opts...)
				ctx, cancel := context.WithTimeout(context.Background(), r.deadline)
				defer cancel()
				var body io.Reader
				if r.method == "POST" {
					body = strings.NewReader(`{"amount":1}`)
				}
				req, err := http.NewRequestWithContext(ctx, r.method, "http://api.test/v1/charges", body)
				require.NoError(t, err)
				start := time.Now()
				resp, err := c.Do(req)
				took := time.Since(start)
				if r.status == 0 {
					require.Error(t, err)
					assert.ErrorIs(t, err, syscall.ECONNRESET)
				} else {
					require.NoError(t, err)
					resp.Body.Close()
					assert.Equal(t, r.status, resp.StatusCode)
				}
				assert.Equal(t, r.sent, srv.sent, "requests sent")
				if r.below > 0 {
					assert.Less(t, took, r.below, "after")
				} else {
					assert.Equal(t, r.exact, took, "after")
				}
			})
		})
	}
}
