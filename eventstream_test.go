package resilient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// esServer is an event stream of events 1..n with ids, that honours
// Last-Event-ID. Each connection sends perConn events, then ends: cleanly
// when clean, else cut mid-event (half of the next event written, then the
// connection closed). Once every event was sent it answers 204. An event
// numbered noID is sent without an id.
type esServer struct {
	n, perConn, noID int
	clean            bool
	retry            string // a retry: field sent first, if not ""
	// nls are the line endings: event i's lines end with nls[i%len(nls)]
	// ("\n" if none).
	nls     []string
	mu      *sync.Mutex
	lastIDs *[]string
}

func esEvent(i, noID int) string {
	if i == noID {
		return fmt.Sprintf("data: event %d\n\n", i)
	}
	return fmt.Sprintf("id: %d\ndata: event %d\n\n", i, i)
}

func (s *esServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get("Last-Event-ID")
	s.mu.Lock()
	*s.lastIDs = append(*s.lastIDs, last)
	s.mu.Unlock()
	from := 1
	if last != "" {
		n, _ := strconv.Atoi(last)
		from = n + 1
	}
	if from > s.n {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush() // a stream: chunked, no length
	if s.retry != "" {
		io.WriteString(w, "retry: "+s.retry+"\n\n")
	}
	i := from
	for ; i <= s.n && i < from+s.perConn; i++ {
		io.WriteString(w, s.event(i))
	}
	if i <= s.n && !s.clean {
		e := s.event(i)
		io.WriteString(w, e[:len(e)/2])
		rsCut(w)
	}
}

// event is event i as s sends it.
func (s *esServer) event(i int) string {
	e := esEvent(i, s.noID)
	if len(s.nls) == 0 {
		return e
	}
	return strings.ReplaceAll(e, "\n", s.nls[i%len(s.nls)])
}

// events is events from..to as s sends them.
func (s *esServer) events(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(s.event(i))
	}
	return b.String()
}

// requests returns the Last-Event-ID of each request.
func (s *esServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), *s.lastIDs...)
}

// started returns s ready to serve, with a new record of its requests.
func (s esServer) started() *esServer {
	s.mu, s.lastIDs = new(sync.Mutex), new([]string)
	return &s
}

// esRead reads an event stream of url with c; resume sends an empty
// Last-Event-ID, the opt-in.
func esRead(ctx context.Context, c *http.Client, url string, resume bool) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if resume {
		req.Header["Last-Event-Id"] = []string{""}
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// esEvents is events from..to as the server sends them.
func esEvents(from, to, noID int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(esEvent(i, noID))
	}
	return b.String()
}

func TestEventStreamResume(t *testing.T) {
	cr, mixed := []string{"\r"}, []string{"\n", "\r\n", "\r"}
	cases := []struct {
		name   string
		srv    esServer
		resume bool   // the caller sends Last-Event-ID
		want   string // what the wrapped client reads
		// wantErr: the wrapped read's error matches the bare one's.
		wantErr bool
		ids     []string // the Last-Event-ID of each request of the wrapped client
	}{
		{name: "cut mid-event: resumed after the last whole event", srv: esServer{n: 10, perConn: 3}, resume: true,
			want: esEvents(1, 10, 0), ids: []string{"", "3", "6", "9", "10"}},
		{name: "clean end: reconnected", srv: esServer{n: 10, perConn: 4, clean: true}, resume: true,
			want: esEvents(1, 10, 0), ids: []string{"", "4", "8", "10"}},
		{name: "CR line endings, clean end: the last event read", srv: esServer{n: 3, perConn: 3, clean: true, nls: cr}, resume: true,
			want: (&esServer{nls: cr}).events(1, 3), ids: []string{"", "3"}},
		{name: "CR line endings, cut mid-event", srv: esServer{n: 10, perConn: 3, nls: cr}, resume: true,
			want: (&esServer{nls: cr}).events(1, 10), ids: []string{"", "3", "6", "9", "10"}},
		{name: "mixed line endings, clean end", srv: esServer{n: 10, perConn: 4, clean: true, nls: mixed}, resume: true,
			want: (&esServer{nls: mixed}).events(1, 10), ids: []string{"", "4", "8", "10"}},
		{name: "mixed line endings, cut mid-event", srv: esServer{n: 10, perConn: 3, nls: mixed}, resume: true,
			want: (&esServer{nls: mixed}).events(1, 10), ids: []string{"", "3", "6", "9", "10"}},
		{name: "not asked: not resumed", srv: esServer{n: 10, perConn: 3},
			want: esEvents(1, 3, 0) + esEvent(4, 0)[:len(esEvent(4, 0))/2], wantErr: true, ids: []string{""}},
		{name: "an event without an id read last: not resumed", srv: esServer{n: 10, perConn: 3, noID: 3}, resume: true,
			want: esEvents(1, 3, 3), wantErr: true, ids: []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bareErr error
			for _, wrap := range []bool{false, true} {
				srv := tc.srv.started()
				hs := httptest.NewServer(srv)
				tr := &http.Transport{}
				c := &http.Client{Transport: tr}
				if wrap {
					c = resilient.Wrap(c)
				}
				got, err := esRead(context.Background(), c, hs.URL, tc.resume)
				tr.CloseIdleConnections()
				hs.Close()
				if !wrap {
					bareErr = err
					if tc.srv.clean {
						require.NoError(t, err)
						assert.Equal(t, tc.srv.events(1, tc.srv.perConn), got, "the bare client's stream ends")
					} else {
						require.Error(t, err, "the bare client's stream is cut")
					}
					continue
				}
				assert.Equal(t, tc.want, got, "each whole event once, none partial")
				assert.Equal(t, tc.ids, srv.requests())
				if tc.wantErr {
					assert.ErrorIs(t, err, bareErr)
				} else {
					assert.NoError(t, err)
				}
			}
		})
	}
}

// TestEventStreamRetryDelay: the server's retry: field is the wait before
// each reconnect, in a synctest bubble.
func TestEventStreamRetryDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := esServer{n: 6, perConn: 2, retry: "5000"}.started()
		n := newPipeNet(srv.ServeHTTP)
		defer n.close()
		c := resilient.Wrap(&http.Client{Transport: n.tr})
		start := time.Now()
		got, err := esRead(context.Background(), c, "http://pipe/events", true)
		require.NoError(t, err)
		assert.Equal(t, 3*5*time.Second, time.Since(start), "2 reconnects and the one answered 204, 5 s before each")
		retry := "retry: 5000\n\n"
		assert.Equal(t, retry+esEvents(1, 2, 0)+retry+esEvents(3, 4, 0)+retry+esEvents(5, 6, 0), got)
		assert.Equal(t, []string{"", "2", "4", "6"}, srv.requests())
	})
}

// TestEventStreamOptIn is docs/resume.md's opt-in: a request that sends an
// empty Last-Event-ID has its stream resumed.
func TestEventStreamOptIn(t *testing.T) {
	srv := esServer{n: 4, perConn: 2}.started()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx := context.Background()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/events", nil)
	req.Header["Last-Event-Id"] = []string{""} // resume this stream: the server honours Last-Event-ID
	req.URL, _ = url.Parse(hs.URL + "/events") // the test's server
	req.Host = ""
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := resilient.Wrap(&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, esEvents(1, 4, 0), string(got))
}

// TestEventStreamNoDelay: the events read before a cut reach the caller
// at once, not after the reconnect's retry: wait.
func TestEventStreamNoDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := esServer{n: 4, perConn: 2, retry: "5000"}.started()
		n := newPipeNet(srv.ServeHTTP)
		defer n.close()
		req, _ := http.NewRequest(http.MethodGet, "http://pipe/events", nil)
		req.Header["Last-Event-Id"] = []string{""}
		resp, err := resilient.Wrap(&http.Client{Transport: n.tr}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		start := time.Now()
		var got []byte
		buf := make([]byte, 64)
		for !strings.Contains(string(got), "event 2\n\n") {
			n, err := resp.Body.Read(buf)
			require.NoError(t, err)
			got = append(got, buf[:n]...)
		}
		assert.Equal(t, time.Duration(0), time.Since(start), "events 1 and 2 before the 5 s wait")
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, 10*time.Second, time.Since(start), "then 2 reconnects (the second answered 204), each after the server's retry:")
		assert.Equal(t, "retry: 5000\n\n"+esEvents(1, 2, 0)+"retry: 5000\n\n"+esEvents(3, 4, 0), string(got)+string(rest))
	})
}

// TestEventStreamNoEventNoProgress: a connection that brings no event (a
// comment, a retry: or an id alone: nothing is dispatched) is no
// progress. Its reconnects are retries, as resumes without progress
// are: they wait the backoff and stop at MaxAttempts. The caller reads
// what each connection sent, as a bare client reads the first; in a
// synctest bubble.
func TestEventStreamNoEventNoProgress(t *testing.T) {
	cases := []struct {
		name, body string
		ids        []string // the Last-Event-ID of each request of the wrapped client
	}{
		{name: "a comment alone", body: ": keepalive\n\n", ids: []string{"", "", ""}},
		{name: "a retry: alone", body: "retry: 0\n\n", ids: []string{"", "", ""}},
		{name: "an id alone", body: "id: 7\n\n", ids: []string{"", "7", "7"}},
	}
	for _, tc := range cases {
		for _, wrap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/wrapped=%v", tc.name, wrap), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var mu sync.Mutex
					var ids []string
					n := newPipeNet(func(w http.ResponseWriter, r *http.Request) {
						mu.Lock()
						ids = append(ids, r.Header.Get("Last-Event-ID"))
						mu.Unlock()
						w.Header().Set("Content-Type", "text/event-stream")
						w.WriteHeader(http.StatusOK)
						w.(http.Flusher).Flush()
						io.WriteString(w, tc.body) // then a clean end
					})
					defer n.close()
					c := &http.Client{Transport: n.tr}
					if wrap {
						c = resilient.Wrap(c, resilient.WithMaxAttempts(3),
							resilient.WithBackoff(resilient.Exponential(time.Second, time.Second)))
					}
					start := time.Now()
					got, err := esRead(context.Background(), c, "http://pipe/events", true)
					require.NoError(t, err, "a clean end")
					mu.Lock()
					defer mu.Unlock()
					if !wrap {
						assert.Equal(t, tc.body, got)
						assert.Equal(t, []string{""}, ids)
						return
					}
					assert.Equal(t, strings.Repeat(tc.body, 3), got)
					assert.Equal(t, tc.ids, ids, "3 connections: MaxAttempts")
					assert.Equal(t, time.Second, time.Since(start), "the first reconnect is free, the second waits the backoff")
				})
			})
		}
	}
}
