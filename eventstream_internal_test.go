package resilient

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEventComplete: where the complete events of a stream's buffer end,
// for each line ending (\n, \r\n, \r), and what their fields say of a
// reconnect.
func TestEventComplete(t *testing.T) {
	cases := []struct {
		name   string
		buf    string
		end    int // the length of the complete events
		events int // the events dispatched: blocks with data
		last   string
		unsafe bool
		retry  time.Duration
	}{
		{name: "one event, \\n", buf: "id: 1\ndata: a\n\nid: 2\nda", end: 15, events: 1, last: "1"},
		{name: "\\r\\n", buf: "id: 7\r\ndata: a\r\n\r\n", end: 18, events: 1, last: "7"},
		{name: "\\r", buf: "id: 7\rdata: a\r\rdata", end: 15, events: 1, last: "7"},
		{name: "\\r, the blank line's \\r the last byte", buf: "id: 7\rdata: a\r\r", end: 15, events: 1, last: "7"},
		{name: "\\r\\n, the blank line's \\r the last byte", buf: "id: 7\r\ndata: a\r\n\r", end: 17, events: 1, last: "7"},
		{name: "\\n, then a blank line's \\r the last byte", buf: "id: 7\ndata: a\n\r", end: 15, events: 1, last: "7"},
		{name: "a field's \\r the last byte waits: it may be \\r\\n", buf: "id: 7\rdata: a\r", end: 0},
		{name: "the \\n after a blank line's \\r starts no event", buf: "\nid: 8\r\ndata: b\r\n\r\n", end: 19, events: 1, last: "8"},
		{name: "mixed endings", buf: "id: 1\rdata: a\r\n\nid: 2\ndata: b\r\r\nid: 3\r\ndata: c\n\r", end: 48, events: 3, last: "3"},
		{name: "no blank line yet", buf: "id: 1\ndata: a\n", end: 0},
		{name: "an event without an id after one with", buf: "id: 1\ndata: a\n\ndata: b\n\n", end: 24, events: 2, last: "1", unsafe: true},
		{name: "an id without a space, then retry", buf: "id:9\ndata: a\n\nretry: 1500\n\n", end: 27, events: 1, last: "9", retry: 1500 * time.Millisecond},
		{name: "an id with NUL is ignored", buf: "id: 1\ndata: a\n\nid: x\x00\ndata: b\n\n", end: 31, events: 2, last: "1", unsafe: true},
		{name: "a comment is no event", buf: "id: 1\ndata: a\n\n: ping\n\n", end: 23, events: 1, last: "1"},
		{name: "an id alone is no event", buf: "id: 1\n\n", end: 7, last: "1"},
		{name: "blank lines alone are handed over", buf: "\n\n\n", end: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &eventBody{buf: []byte(tc.buf)}
			end, events := s.complete()
			assert.Equal(t, tc.end, end)
			assert.Equal(t, tc.events, events)
			assert.Equal(t, tc.last, s.ids.last)
			assert.Equal(t, tc.unsafe, s.ids.unsafe)
			assert.Equal(t, tc.retry, s.ids.retry)
		})
	}
}

// dataThenCut returns its data and the cut in one Read.
type dataThenCut struct{ data string }

func (d *dataThenCut) Read(p []byte) (int, error) {
	if d.data == "" {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, d.data)
	d.data = d.data[n:]
	return n, io.ErrUnexpectedEOF
}

// TestEventStreamEventsBeforeReconnect: events read in the same Read as
// the cut reach the caller before the reconnect waits the server's
// retry: delay.
func TestEventStreamEventsBeforeReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lastIDs []string
		tr := NewTransport(rsBase(func(req *http.Request) *http.Response {
			lastIDs = append(lastIDs, req.Header.Get("Last-Event-ID"))
			if len(lastIDs) > 1 {
				return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: req}
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, ContentLength: -1,
				Body: io.NopCloser(&dataThenCut{data: "retry: 5000\n\nid: 1\ndata: a\n\n"}), Request: req}
		}))
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/events", nil)
		req.Header["Last-Event-Id"] = []string{""}
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		start := time.Now()
		buf := make([]byte, 100)
		n, err := resp.Body.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, "retry: 5000\n\nid: 1\ndata: a\n\n", string(buf[:n]))
		assert.Equal(t, time.Duration(0), time.Since(start), "before the reconnect's wait")
		_, err = resp.Body.Read(buf)
		assert.Equal(t, io.EOF, err, "the reconnect answered 204: the stream ended")
		assert.Equal(t, 5*time.Second, time.Since(start))
		assert.Equal(t, []string{"", "1"}, lastIDs)
	})
}

// TestEventStreamSplitReads: a stream read one byte at a time, so that
// each \r and the \n after it come in two reads: each event reaches the
// caller once, whole, the last one at a clean end too, and the reconnect
// names the last whole event's id. A cut drops the partial event.
func TestEventStreamSplitReads(t *testing.T) {
	const events = "id: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\n\nid: 3\ndata: c\r\r"
	cases := []struct {
		name, body string
		cut        bool // the body ends with a cut, not a clean end
		want       string
		ids        []string // Last-Event-ID of each request
	}{
		{name: "clean end, a \\r the last byte", body: events, want: events, ids: []string{"", "3"}},
		{name: "clean end, a \\r\\n the last bytes", body: events + "\n", want: events + "\n", ids: []string{"", "3"}},
		{name: "cut after a field's \\r", body: events + "id: 4\r\ndata: d\r", cut: true, want: events, ids: []string{"", "3"}},
		{name: "cut after a \\r\\n ending a field", body: events + "id: 4\r\ndata: d\r\n", cut: true, want: events, ids: []string{"", "3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			tr := NewTransport(rsBase(func(req *http.Request) *http.Response {
				ids = append(ids, req.Header.Get("Last-Event-ID"))
				if len(ids) > 1 {
					return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: req}
				}
				var body io.Reader = iotest.OneByteReader(strings.NewReader(tc.body))
				if tc.cut {
					body = io.MultiReader(body, iotest.ErrReader(io.ErrUnexpectedEOF))
				}
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
					ContentLength: -1, Body: io.NopCloser(body), Request: req}
			}))
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/events", nil)
			req.Header["Last-Event-Id"] = []string{""}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "the reconnect answered 204: the stream ended")
			assert.Equal(t, tc.want, string(got))
			assert.Equal(t, tc.ids, ids)
		})
	}
}
