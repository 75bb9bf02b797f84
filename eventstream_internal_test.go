package resilient

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestEventComplete: where the complete events of a stream's buffer end,
// for each line ending (\n, \r\n, \r), and what their fields say of a
// reconnect.
func TestEventComplete(t *testing.T) {
	cases := []struct {
		name   string
		buf    string
		end    int // the length of the complete events
		last   string
		unsafe bool
		retry  time.Duration
	}{
		{name: "one event, \\n", buf: "id: 1\ndata: a\n\nid: 2\nda", end: 15, last: "1"},
		{name: "\\r\\n", buf: "id: 7\r\ndata: a\r\n\r\n", end: 18, last: "7"},
		{name: "\\r", buf: "id: 7\rdata: a\r\rdata", end: 15, last: "7"},
		{name: "a lone \\r at the end waits", buf: "id: 7\ndata: a\n\r", end: 0},
		{name: "no blank line yet", buf: "id: 1\ndata: a\n", end: 0},
		{name: "an event without an id after one with", buf: "id: 1\ndata: a\n\ndata: b\n\n", end: 24, last: "1", unsafe: true},
		{name: "an id without a space, then retry", buf: "id:9\ndata: a\n\nretry: 1500\n\n", end: 27, last: "9", retry: 1500 * time.Millisecond},
		{name: "an id with NUL is ignored", buf: "id: 1\ndata: a\n\nid: x\x00\ndata: b\n\n", end: 31, last: "1", unsafe: true},
		{name: "a comment is no event", buf: "id: 1\ndata: a\n\n: ping\n\n", end: 23, last: "1"},
		{name: "blank lines alone", buf: "\n\n\n", end: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &eventBody{buf: []byte(tc.buf)}
			assert.Equal(t, tc.end, s.complete())
			assert.Equal(t, tc.last, s.ids.last)
			assert.Equal(t, tc.unsafe, s.ids.unsafe)
			assert.Equal(t, tc.retry, s.ids.retry)
		})
	}
}
