package otelresilient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/otelresilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resumeBase answers a GET of content whose first body breaks after cut
// bytes, and a Range request with the rest (a 206).
type resumeBase struct {
	content []byte
	cut     int
}

func (b resumeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	h := http.Header{"Etag": {`"v1"`}, "Accept-Ranges": {"bytes"}}
	n := int64(len(b.content))
	if rng := req.Header.Get("Range"); rng != "" {
		var first int64
		fmt.Sscanf(rng, "bytes=%d-", &first)
		h.Set("Content-Range", "bytes "+strconv.FormatInt(first, 10)+"-"+strconv.FormatInt(n-1, 10)+"/"+strconv.FormatInt(n, 10))
		return &http.Response{StatusCode: http.StatusPartialContent, Header: h, ContentLength: n - first,
			Body: io.NopCloser(bytes.NewReader(b.content[first:])), Request: req}, nil
	}
	body := io.MultiReader(bytes.NewReader(b.content[:b.cut]), errReader{})
	return &http.Response{StatusCode: http.StatusOK, Header: h, ContentLength: n, Body: io.NopCloser(body), Request: req}, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// TestResumeSpanEvent: a resume while the request's span records is a
// "resilient.resume" span event after the attempt's.
func TestResumeSpanEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	content := bytes.Repeat([]byte("0123456789"), 10_000)
	tr := resilient.NewTransport(resumeBase{content: content, cut: 40_000}, h.inst.TransportOption())
	ctx, span := h.tp.Tracer("test").Start(context.Background(), "download")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	span.End()
	require.NoError(t, err)
	assert.Equal(t, content, got)
	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	events := spans[0].Events()
	require.Len(t, events, 2)
	assert.Equal(t, otelresilient.AttemptEventName, events[0].Name)
	assert.Equal(t, otelresilient.ResumeEventName, events[1].Name)
	assert.Equal(t, map[string]string{"attempt": "1", "action": "success", "status": "206"}, eventAttrs(events[1]))
}
