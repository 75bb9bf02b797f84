package resilient_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
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

// rsContent returns n bytes of a fixed pseudo-random content.
func rsContent(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// rsServer serves content with http.ServeContent, and cuts the connection
// of the i-th answer after cuts[i] body bytes (none, if i is past cuts or
// cuts[i] < 0). hook, if set, answers request i itself when it returns
// true. It records the Range and If-Range of every request.
type rsServer struct {
	content []byte
	modtime time.Time
	mu      sync.Mutex
	etag    string // "" for none
	cuts    []int64
	ranges  []string
	ifRange []string
	hook    func(s *rsServer, i int, w http.ResponseWriter, r *http.Request) bool
}

func (s *rsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.ranges)
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	s.ifRange = append(s.ifRange, r.Header.Get("If-Range"))
	cut := int64(-1)
	if i < len(s.cuts) {
		cut = s.cuts[i]
	}
	hook := s.hook
	s.mu.Unlock()
	if hook != nil && hook(s, i, w, r) {
		return
	}
	s.mu.Lock()
	etag := s.etag
	s.mu.Unlock()
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	http.ServeContent(&rsCutWriter{ResponseWriter: w, left: cut}, r, "", s.modtime, bytes.NewReader(s.content))
}

// requests returns the Range of each request the server got.
func (s *rsServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

// rsCutWriter writes left body bytes (all if left < 0), then cuts the
// connection: what it wrote is flushed, and the connection closed.
type rsCutWriter struct {
	http.ResponseWriter
	left int64
}

var errRsCut = errors.New("cut")

func (w *rsCutWriter) Write(p []byte) (int, error) {
	if w.left < 0 || int64(len(p)) <= w.left {
		if w.left >= 0 {
			w.left -= int64(len(p))
		}
		return w.ResponseWriter.Write(p)
	}
	n, _ := w.ResponseWriter.Write(p[:w.left])
	w.left = 0
	rsCut(w.ResponseWriter)
	return n, errRsCut
}

// rsCut flushes what w wrote and closes its connection (HTTP/1), or
// resets its stream (HTTP/2: RST_STREAM).
func rsCut(w http.ResponseWriter) {
	w.(http.Flusher).Flush()
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	if c, _, err := hj.Hijack(); err == nil {
		c.Close()
	}
}

// rsPartial answers r with a 206 of content[first:last+1] of total,
// without Accept-Ranges checks: a hook's misbehaving server.
func rsPartial(w http.ResponseWriter, etag, ctype string, content []byte, first, last, total int64) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Accept-Ranges", "bytes")
	if ctype != "" {
		w.Header().Set("Content-Type", ctype)
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, total))
	w.Header().Set("Content-Length", strconv.FormatInt(last-first+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(content[first : last+1])
}

// rsChunked answers a 206 declaring first-last of total with body, and no
// Content-Length (chunked): net/http does not hold body to the range.
func rsChunked(w http.ResponseWriter, etag string, body []byte, first, last, total int64) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, total))
	w.WriteHeader(http.StatusPartialContent)
	w.(http.Flusher).Flush()
	w.Write(body)
}

// rsOffset is the first byte a request's Range asks for.
func rsOffset(r *http.Request) int64 {
	var first int64
	fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &first)
	return first
}

// rsRead is what a client read of one GET: the status, the bytes and the
// read's error (or the request's).
type rsRead struct {
	status int
	body   []byte
	err    error
}

// rsReaders are the two ways a caller reads a body: Read calls
// (io.ReadAll), and io.Copy, which calls the body's WriteTo if it has one.
var rsReaders = []struct {
	name string
	read func(io.Reader) ([]byte, error)
}{
	{"ReadAll", io.ReadAll},
	{"Copy", func(r io.Reader) ([]byte, error) {
		var buf bytes.Buffer
		_, err := io.Copy(&buf, r)
		return buf.Bytes(), err
	}},
}

// rsGet sends a GET of url with c (with the Range rng if not "") and
// reads the whole body with io.ReadAll.
func rsGet(ctx context.Context, c *http.Client, url, rng string) rsRead {
	return rsGetWith(ctx, c, url, rng, io.ReadAll)
}

// rsGetWith is rsGet reading the body with read.
func rsGetWith(ctx context.Context, c *http.Client, url, rng string, read func(io.Reader) ([]byte, error)) rsRead {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := c.Do(req)
	if err != nil {
		return rsRead{err: err}
	}
	defer resp.Body.Close()
	b, err := read(resp.Body)
	return rsRead{status: resp.StatusCode, body: b, err: err}
}

// rsCase is one scenario, run over a bare client and a wrapped one, each
// against a new server.
type rsCase struct {
	name   string
	etag   string
	old    bool // modtime an hour before now (a strong Last-Modified); else an hour after
	zero   bool // no modtime: no Last-Modified
	cuts   []int64
	rng    string
	hook   func(s *rsServer, i int, w http.ResponseWriter, r *http.Request) bool
	opts   []resilient.Option
	resume bool // the wrapped client reads the whole answer
	// requests the wrapped client's server gets (0: not checked).
	requests int
	is       error // the wrapped read's error also matches it
}

const rsSize = 256 << 10

func TestResumeNeverWorse(t *testing.T) {
	content := rsContent(rsSize)
	changedEtag := func(s *rsServer, i int, w http.ResponseWriter, r *http.Request) bool {
		if i > 0 {
			s.mu.Lock()
			s.etag = `"v2"`
			s.mu.Unlock()
		}
		return false
	}
	resumeWith := func(f func(w http.ResponseWriter, r *http.Request)) func(*rsServer, int, http.ResponseWriter, *http.Request) bool {
		return func(_ *rsServer, i int, w http.ResponseWriter, r *http.Request) bool {
			if i == 0 {
				return false
			}
			f(w, r)
			return true
		}
	}
	total := int64(rsSize)
	cases := []rsCase{
		{name: "strong etag, cut once", etag: `"v1"`, cuts: []int64{10_000}, resume: true, requests: 2},
		{name: "strong etag, cut 3 times", etag: `"v1"`, cuts: []int64{5_000, 60_000, 1}, resume: true, requests: 4},
		{name: "strong last-modified", old: true, cuts: []int64{10_000}, resume: true, requests: 2},
		{name: "caller's range, cut", etag: `"v1"`, rng: "bytes=1000-100999", cuts: []int64{30_000}, resume: true, requests: 2},
		{name: "shorter ranges resumed again", etag: `"v1"`, cuts: []int64{10_000}, resume: true, hook: resumeWith(func(w http.ResponseWriter, r *http.Request) {
			first := rsOffset(r)
			rsPartial(w, `"v1"`, "", content, first, min(first+99_999, total-1), total)
		}), requests: 4},
		{name: "a chunked 206 longer than its range: the extra never read", etag: `"v1"`, cuts: []int64{10_000}, resume: true, requests: 2,
			hook: resumeWith(func(w http.ResponseWriter, r *http.Request) {
				first := rsOffset(r)
				rsChunked(w, `"v1"`, append(content[first:total:total], "EXTRA-GARBAGE"...), first, total-1, total)
			})},
		{name: "a chunked 206 of a shorter range, longer than it: resumed at its end", etag: `"v1"`, cuts: []int64{10_000}, resume: true, requests: 3,
			hook: func(s *rsServer, i int, w http.ResponseWriter, r *http.Request) bool {
				first := rsOffset(r)
				switch i {
				case 0:
					return false
				case 1:
					rsChunked(w, `"v1"`, append(content[first:first+30_000:first+30_000], "JUNK"...), first, first+29_999, total)
				default:
					rsPartial(w, `"v1"`, "", content, first, total-1, total)
				}
				return true
			}},
		{name: "a chunked 206 shorter than its range: resumed again", etag: `"v1"`, cuts: []int64{10_000}, resume: true, requests: 3,
			hook: func(s *rsServer, i int, w http.ResponseWriter, r *http.Request) bool {
				first := rsOffset(r)
				switch i {
				case 0:
					return false
				case 1:
					rsChunked(w, `"v1"`, content[first:first+50_000], first, total-1, total) // then a clean end
				default:
					rsPartial(w, `"v1"`, "", content, first, total-1, total)
				}
				return true
			}},
		{name: "progress does not spend attempts", etag: `"v1"`, cuts: []int64{1000, 1000, 1000, 1000, 1000, 1000}, resume: true, requests: 7,
			opts: []resilient.Option{resilient.WithMaxAttempts(2)}},
		{name: "weak etag", etag: `W/"v1"`, cuts: []int64{10_000}, requests: 1},
		{name: "no validator", zero: true, cuts: []int64{10_000}, requests: 1},
		{name: "last-modified after date", cuts: []int64{10_000}, requests: 1},
		{name: "no accept-ranges", etag: `"v1"`, cuts: []int64{10_000}, requests: 1, hook: func(_ *rsServer, _ int, w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Length", strconv.Itoa(len(content)))
			(&rsCutWriter{ResponseWriter: w, left: 10_000}).Write(content)
			return true
		}},
		{name: "changed: 200 instead of 206", etag: `"v1"`, cuts: []int64{10_000}, hook: changedEtag, requests: 2},
		{name: "416", etag: `"v1"`, cuts: []int64{10_000}, requests: 2, hook: resumeWith(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		})},
		{name: "misaligned content-range", etag: `"v1"`, cuts: []int64{10_000}, requests: 2, hook: resumeWith(func(w http.ResponseWriter, r *http.Request) {
			rsPartial(w, `"v1"`, "", content, rsOffset(r)+1, total-1, total)
		})},
		{name: "another total", etag: `"v1"`, cuts: []int64{10_000}, requests: 2, hook: resumeWith(func(w http.ResponseWriter, r *http.Request) {
			rsPartial(w, `"v1"`, "", content, rsOffset(r), total-2, total-1)
		})},
		{name: "another etag on the 206", etag: `"v1"`, cuts: []int64{10_000}, requests: 2, hook: resumeWith(func(w http.ResponseWriter, r *http.Request) {
			rsPartial(w, `"v2"`, "", content, rsOffset(r), total-1, total)
		})},
		{name: "multipart/byteranges", etag: `"v1"`, cuts: []int64{10_000}, requests: 2, hook: resumeWith(func(w http.ResponseWriter, r *http.Request) {
			rsPartial(w, `"v1"`, "multipart/byteranges; boundary=x", content, rsOffset(r), total-1, total)
		})},
		{name: "resumes without progress stop", etag: `"v1"`, cuts: []int64{10_000}, requests: 3, is: resilient.ErrRetriesExhausted,
			opts: []resilient.Option{resilient.WithMaxAttempts(3), resilient.WithBackoff(resilient.Exponential(time.Millisecond, time.Millisecond))},
			hook: resumeWith(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })},
		{name: "an outer retry loop: no resume without progress", etag: `"v1"`, cuts: []int64{10_000}, requests: 2, is: resilient.ErrRetriesExhausted,
			opts: []resilient.Option{resilient.WithOuterRetries(true), resilient.WithBackoff(resilient.Exponential(time.Millisecond, time.Millisecond))},
			hook: resumeWith(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })},
		{name: "server delay over the maximum", etag: `"v1"`, cuts: []int64{10_000}, requests: 2, is: resilient.ErrDelayTooLong,
			opts: []resilient.Option{resilient.WithRetryAfterMax(time.Second)},
			hook: resumeWith(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "60")
				w.WriteHeader(http.StatusServiceUnavailable)
			})},
	}
	for _, tc := range cases {
		for _, rd := range rsReaders {
			t.Run(tc.name+"/"+rd.name, func(t *testing.T) { rsCheck(t, tc, content, rd.read) })
		}
	}
}

// rsCheck runs tc, reading bodies with read, and checks the wrapped read
// against the bare one.
func rsCheck(t *testing.T, tc rsCase, content []byte, read func(io.Reader) ([]byte, error)) {
	t.Helper()
	bare, wrapped, srv := rsPair(t, tc, content, read)
	want := content
	if tc.rng != "" {
		want = content[1000:101000]
	}
	require.Error(t, bare.err, "the bare client's read is cut")
	assert.Equal(t, bare.status, wrapped.status)
	if tc.resume {
		require.NoError(t, wrapped.err)
		assert.True(t, bytes.Equal(want, wrapped.body), "the wrapped read is the representation")
	} else {
		require.Error(t, wrapped.err)
		assert.ErrorIs(t, wrapped.err, bare.err, "errors.Is finds the bare client's error")
		assert.Equal(t, bare.body, wrapped.body, "the same bytes before the error")
		if tc.is != nil {
			assert.ErrorIs(t, wrapped.err, tc.is)
		}
	}
	if tc.requests > 0 {
		assert.Len(t, srv.requests(), tc.requests, "requests: %q", srv.requests())
	}
}

// rsPair runs tc over a bare client, then a wrapped one, each against a
// new server; it returns the wrapped one's server.
func rsPair(t *testing.T, tc rsCase, content []byte, read func(io.Reader) ([]byte, error)) (bare, wrapped rsRead, srv *rsServer) {
	t.Helper()
	for _, wrap := range []bool{false, true} {
		srv = &rsServer{content: content, etag: tc.etag, cuts: tc.cuts, hook: tc.hook, modtime: time.Now().Add(time.Hour)}
		switch {
		case tc.old:
			srv.modtime = time.Now().Add(-time.Hour)
		case tc.zero:
			srv.modtime = time.Time{}
		}
		hs := httptest.NewServer(srv)
		tr := &http.Transport{}
		c := &http.Client{Transport: tr}
		if wrap {
			c = resilient.Wrap(c, tc.opts...)
		}
		r := rsGetWith(context.Background(), c, hs.URL+"/f", tc.rng, read)
		tr.CloseIdleConnections()
		hs.Close()
		if wrap {
			wrapped = r
		} else {
			bare = r
		}
	}
	return bare, wrapped, srv
}

// TestResumeNotWrapped: answers that are not resumed keep net/http's own
// behaviour: a body net/http decompressed (offsets would count decoded
// bytes), a HEAD, a 304.
func TestResumeNotWrapped(t *testing.T) {
	content := rsContent(rsSize)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(content)
	zw.Close()
	cases := []rsCase{
		{name: "decompressed by net/http", cuts: []int64{10_000}, hook: func(_ *rsServer, _ int, w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Accept-Ranges", "bytes")
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", strconv.Itoa(gz.Len()))
			(&rsCutWriter{ResponseWriter: w, left: 10_000}).Write(gz.Bytes())
			return true
		}},
	}
	for _, tc := range cases {
		bare, wrapped, srv := rsPair(t, tc, content, io.ReadAll)
		require.Error(t, bare.err)
		assert.Equal(t, bare.err.Error(), wrapped.err.Error())
		assert.Equal(t, bare.body, wrapped.body)
		assert.Len(t, srv.requests(), 1)
	}
}

// TestResumeClosedBody: a body the caller closed is never resumed: its
// reads fail as a bare client's do.
func TestResumeClosedBody(t *testing.T) {
	content := rsContent(rsSize)
	for _, wrap := range []bool{false, true} {
		srv := &rsServer{content: content, etag: `"v1"`, cuts: []int64{100_000}}
		hs := httptest.NewServer(srv)
		c := &http.Client{Transport: &http.Transport{}}
		if wrap {
			c = resilient.Wrap(c)
		}
		resp, err := c.Get(hs.URL)
		require.NoError(t, err)
		_, err = io.ReadFull(resp.Body, make([]byte, 1000))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		_, err = resp.Body.Read(make([]byte, 10))
		assert.EqualError(t, err, "http: read on closed response body", "wrapped %v", wrap)
		hs.Close()
		assert.Len(t, srv.requests(), 1)
	}
}

// TestResumeObserved: each resume is an EventResume from the reading
// goroutine; the Report is final when RoundTrip returns, and reading it
// then is not a data race (go test -race).
func TestResumeObserved(t *testing.T) {
	content := rsContent(rsSize)
	srv := &rsServer{content: content, etag: `"v1"`, cuts: []int64{10_000, 20_000}, modtime: time.Now().Add(time.Hour)}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var (
		mu     sync.Mutex
		events []resilient.Event
	)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var logs bytes.Buffer
	c := resilient.Wrap(&http.Client{Transport: tr}, resilient.WithObserver(func(_ context.Context, e resilient.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}), resilient.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	var rep resilient.Report
	req, _ := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), &rep), http.MethodGet, hs.URL, nil)
	resp, err := c.Do(req)
	require.NoError(t, err)
	done := make(chan struct{})
	var attempts int
	go func() { // the Report, read while the body resumes
		attempts = len(rep.Attempts)
		close(done)
	}()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-done
	require.NoError(t, err)
	assert.True(t, bytes.Equal(content, b))
	assert.Equal(t, 1, attempts)
	mu.Lock()
	defer mu.Unlock()
	var resumes []resilient.AttemptReport
	for _, e := range events {
		if e.Kind == resilient.EventResume {
			resumes = append(resumes, e.Attempt)
			assert.Equal(t, http.MethodGet, e.Method)
		}
	}
	require.Len(t, resumes, 2)
	for i, a := range resumes {
		assert.Equal(t, i+1, a.Attempt)
		assert.Equal(t, http.StatusPartialContent, a.StatusCode)
		assert.Equal(t, resilient.Success, a.Action)
	}
	assert.Equal(t, resilient.EventOutcome, events[len(events)-3].Kind, "the outcome comes before the resumes")
	assert.Equal(t, 2, strings.Count(logs.String(), `msg="resilient: resume"`), "logged at Debug:\n%s", logs.String())
}

// TestResumeDeadlines: a resume waits within the caller's deadline and
// ends when the caller gives up, in a synctest bubble over an in-memory
// network.
func TestResumeDeadlines(t *testing.T) {
	content := rsContent(rsSize)
	unavailable := func(retryAfter string) func(*rsServer, int, http.ResponseWriter, *http.Request) bool {
		return func(_ *rsServer, i int, w http.ResponseWriter, _ *http.Request) bool {
			if i == 0 {
				return false
			}
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
	}
	cases := []struct {
		name     string
		hook     func(*rsServer, int, http.ResponseWriter, *http.Request) bool
		timeout  time.Duration // the caller's deadline
		cancelAt time.Duration // when the caller cancels, if > 0
		opts     []resilient.Option
		took     time.Duration // until the read's error
		is       error
		requests int
	}{
		{name: "server delay past the deadline", hook: unavailable("20"), timeout: 10 * time.Second,
			is: resilient.ErrDelayTooLong, requests: 2},
		{name: "server delay within the deadline", hook: unavailable("2"), timeout: 10 * time.Second,
			opts: []resilient.Option{resilient.WithMaxAttempts(3)}, took: 2 * time.Second, is: resilient.ErrRetriesExhausted, requests: 3},
		{name: "cancelled during the backoff", hook: unavailable(""), cancelAt: 3 * time.Second,
			opts: []resilient.Option{resilient.WithBackoff(resilient.Exponential(10*time.Second, 10*time.Second))},
			took: 3 * time.Second, is: context.Canceled, requests: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &rsServer{content: content, etag: `"v1"`, cuts: []int64{10_000}, hook: tc.hook, modtime: time.Now()}
				n := newPipeNet(srv.ServeHTTP)
				defer n.close()
				c := resilient.Wrap(&http.Client{Transport: n.tr}, tc.opts...)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.timeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				if tc.cancelAt > 0 {
					time.AfterFunc(tc.cancelAt, cancel)
				}
				start := time.Now()
				r := rsGet(ctx, c, "http://pipe/f", "")
				assert.Equal(t, tc.took, time.Since(start))
				require.Error(t, r.err)
				assert.ErrorIs(t, r.err, io.ErrUnexpectedEOF, "the bare client's error")
				assert.ErrorIs(t, r.err, tc.is)
				assert.Equal(t, content[:10_000], r.body)
				assert.Len(t, srv.requests(), tc.requests)
			})
		})
	}
}

// rsFailWriter fails its writes once it has taken left bytes.
type rsFailWriter struct{ left int }

var errRsWrite = errors.New("disk full")

func (w *rsFailWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errRsWrite
	}
	w.left -= len(p)
	return len(p), nil
}

// TestResumeWriterError: an io.Copy whose writer fails ends as the bare
// body's does: the writer's error, and no resume sent.
func TestResumeWriterError(t *testing.T) {
	content := rsContent(rsSize)
	var got [2]error
	var n [2]int64
	for i, wrap := range []bool{false, true} {
		srv := &rsServer{content: content, etag: `"v1"`}
		hs := httptest.NewServer(srv)
		tr := &http.Transport{}
		c := &http.Client{Transport: tr}
		if wrap {
			c = resilient.Wrap(c)
		}
		resp, err := c.Get(hs.URL)
		require.NoError(t, err)
		n[i], got[i] = io.Copy(&rsFailWriter{left: 50_000}, resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		hs.Close()
		assert.Len(t, srv.requests(), 1, "wrapped %v", wrap)
	}
	assert.Equal(t, got[0], got[1])
	assert.Equal(t, n[0], n[1])
	assert.ErrorIs(t, got[1], errRsWrite)
}

// TestResumeCloseDuringResume: closing the body while a resume is in
// flight ends the resume (the server sees its request cancelled), and the
// read ends with the bare client's error.
func TestResumeCloseDuringResume(t *testing.T) {
	content := rsContent(rsSize)
	resuming := make(chan struct{})
	srv := &rsServer{content: content, etag: `"v1"`, cuts: []int64{10_000}, modtime: time.Now().Add(time.Hour),
		hook: func(_ *rsServer, i int, _ http.ResponseWriter, r *http.Request) bool {
			if i == 0 {
				return false
			}
			close(resuming)
			<-r.Context().Done() // until the client gives the resume up
			return true
		}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := resilient.Wrap(&http.Client{Transport: tr}).Get(hs.URL)
	require.NoError(t, err)
	done := make(chan error)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	<-resuming
	require.NoError(t, resp.Body.Close())
	err = <-done
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Len(t, srv.requests(), 2)
}

// TestResumeGetWithBody: a GET with a body is not resumed: its body is not
// the Transport's to send again.
func TestResumeGetWithBody(t *testing.T) {
	content := rsContent(rsSize)
	srv := &rsServer{content: content, etag: `"v1"`, cuts: []int64{10_000}, modtime: time.Now().Add(time.Hour)}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, hs.URL, bytes.NewReader([]byte("q")))
	resp, err := resilient.Wrap(&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, io.ErrUnexpectedEOF, err)
	assert.Len(t, srv.requests(), 1)
}

// TestResumeReadAfterError: a read after the error that was not resumed
// returns that error again, as the bare body's does, and sends nothing.
func TestResumeReadAfterError(t *testing.T) {
	content := rsContent(rsSize)
	var errs [2][2]error
	for i, wrap := range []bool{false, true} {
		srv := &rsServer{content: content, etag: `"v1"`, cuts: []int64{10_000}, modtime: time.Now().Add(time.Hour),
			hook: func(_ *rsServer, i int, w http.ResponseWriter, _ *http.Request) bool {
				if i > 0 {
					w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
				}
				return i > 0
			}}
		hs := httptest.NewServer(srv)
		tr := &http.Transport{}
		c := &http.Client{Transport: tr}
		if wrap {
			c = resilient.Wrap(c)
		}
		resp, err := c.Get(hs.URL)
		require.NoError(t, err)
		_, errs[i][0] = io.ReadAll(resp.Body)
		_, errs[i][1] = resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
		tr.CloseIdleConnections()
		hs.Close()
		if wrap {
			assert.Len(t, srv.requests(), 2, "one resume, answered 416")
		}
	}
	assert.Equal(t, errs[0][0], errs[0][1], "the bare body's error is sticky")
	assert.ErrorIs(t, errs[1][0], errs[0][0])
	assert.Equal(t, errs[1][0], errs[1][1], "so is the wrapped one's")
}

// TestResumeHTTP2: an HTTP/2 stream reset mid-body (RST_STREAM) is a cut:
// the bare client's read fails with the stream error, the wrapped one's
// reads the whole body.
func TestResumeHTTP2(t *testing.T) {
	content := rsContent(rsSize)
	var reads [2]rsRead
	for i, wrap := range []bool{false, true} {
		srv := &rsServer{content: content, etag: `"v1"`, cuts: []int64{100_000}, modtime: time.Now().Add(time.Hour)}
		hs := httptest.NewUnstartedServer(srv)
		hs.EnableHTTP2 = true
		hs.Config.ErrorLog = log.New(io.Discard, "", 0)
		hs.StartTLS()
		c := hs.Client()
		if wrap {
			c = resilient.Wrap(c)
		}
		reads[i] = rsGet(context.Background(), c, hs.URL, "")
		c.CloseIdleConnections()
		hs.Close()
		assert.Len(t, srv.requests(), i+1)
	}
	require.Error(t, reads[0].err)
	assert.Contains(t, reads[0].err.Error(), "stream error")
	require.NoError(t, reads[1].err)
	assert.True(t, bytes.Equal(content, reads[1].body))
}
