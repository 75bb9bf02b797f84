package resilient

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResumable: which answers RoundTrip hands back with a body that
// resumes at a cut (a resumeBody whose header validates), and which as
// they came.
func TestResumable(t *testing.T) {
	date := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return date.Add(d).Format(http.TimeFormat) }
	ok := []string{"Etag", `"v1"`, "Accept-Ranges", "bytes"}
	with := func(kv ...string) []string { return append(append([]string(nil), ok...), kv...) }
	cases := []struct {
		name    string
		method  string
		status  int
		header  []string
		length  int64
		rng     string // the caller's Range
		wrapped bool
	}{
		{name: "200, strong etag", header: ok, wrapped: true},
		{name: "200, strong last-modified", header: []string{"Accept-Ranges", "bytes", "Last-Modified", at(-time.Second), "Date", at(0)}, wrapped: true},
		{name: "last-modified under 1 s before date", header: []string{"Accept-Ranges", "bytes", "Last-Modified", at(0), "Date", at(0)}},
		{name: "last-modified, no date", header: []string{"Accept-Ranges", "bytes", "Last-Modified", at(-time.Hour)}},
		{name: "weak etag", header: []string{"Etag", `W/"v1"`, "Accept-Ranges", "bytes"}},
		{name: "weak etag, strong last-modified", header: []string{"Etag", `W/"v1"`, "Accept-Ranges", "bytes", "Last-Modified", at(-time.Hour), "Date", at(0)}},
		{name: "unquoted etag", header: []string{"Etag", `v1`, "Accept-Ranges", "bytes"}},
		{name: "no accept-ranges", header: []string{"Etag", `"v1"`}},
		{name: "accept-ranges none", header: []string{"Etag", `"v1"`, "Accept-Ranges", "none"}},
		{name: "unknown length", header: ok, length: -1},
		{name: "under 64 KiB", header: ok, length: 64<<10 - 1},
		{name: "64 KiB", header: ok, length: 64 << 10, wrapped: true},
		{name: "HEAD", method: http.MethodHead, header: ok},
		{name: "POST", method: http.MethodPost, header: ok},
		{name: "101", status: http.StatusSwitchingProtocols, header: ok},
		{name: "204", status: http.StatusNoContent, header: ok},
		{name: "304", status: http.StatusNotModified, header: ok},
		{name: "404", status: http.StatusNotFound, header: ok},
		{name: "206 to the caller's range", status: http.StatusPartialContent, rng: "bytes=10-100009",
			header: with("Content-Range", "bytes 10-100009/1000000"), length: 100_000, wrapped: true},
		{name: "206 without the caller's range", status: http.StatusPartialContent,
			header: with("Content-Range", "bytes 10-100009/1000000"), length: 100_000},
		{name: "206 of unknown total", status: http.StatusPartialContent, rng: "bytes=10-100009",
			header: with("Content-Range", "bytes 10-100009/*"), length: 100_000},
		{name: "206 whose range is not its length", status: http.StatusPartialContent, rng: "bytes=10-100009",
			header: with("Content-Range", "bytes 10-100019/1000000"), length: 100_000},
		{name: "206 multipart/byteranges", status: http.StatusPartialContent, rng: "bytes=10-100009,200000-200009",
			header: with("Content-Type", "multipart/byteranges; boundary=x", "Content-Range", "bytes 10-100009/1000000"), length: 100_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, status, length := tc.method, tc.status, tc.length
			if method == "" {
				method = http.MethodGet
			}
			if status == 0 {
				status = http.StatusOK
			}
			if length == 0 {
				length = 100_000
			}
			req, _ := http.NewRequest(method, "http://api.test/f", nil)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			h := http.Header{}
			for i := 0; i < len(tc.header); i += 2 {
				h[tc.header[i]] = append(h[tc.header[i]], tc.header[i+1])
			}
			tr := NewTransport(rsBase(func(req *http.Request) *http.Response {
				return &http.Response{StatusCode: status, Header: h, ContentLength: length,
					Body: io.NopCloser(strings.NewReader("x")), Request: req}
			}))
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			b, ok := resp.Body.(*resumeBody) // wrapped, and resumed at a cut
			assert.Equal(t, tc.wrapped, ok && b.validate() != nil)
		})
	}
}

// TestResumableUncompressed: a body net/http decompressed is not resumed:
// its offsets count decoded bytes.
func TestResumableUncompressed(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/f", nil)
	resp := &http.Response{StatusCode: http.StatusOK, Uncompressed: true, ContentLength: 100_000,
		Header: http.Header{"Etag": {`"v1"`}, "Accept-Ranges": {"bytes"}}, Body: http.NoBody, Request: req}
	got, err := NewTransport(rsBase(func(*http.Request) *http.Response { return resp })).RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, http.NoBody, got.Body)
}

// rsBase is a base transport answering with f's response.
type rsBase func(*http.Request) *http.Response

func (f rsBase) RoundTrip(req *http.Request) (*http.Response, error) { return f(req), nil }
