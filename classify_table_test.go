package resilient_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// classifyCase is an outcome that docs/classification.md's classification
// table names by a row, and the Action the row's decision gives it.
type classifyCase struct {
	method string
	keyed  bool
	resp   func() *http.Response
	err    error
	want   resilient.Action
}

// classifyRows are the cases of each row of docs/classification.md's
// classification table, by the row's first cell. Each row's first case
// is its own: the row's decision begins with that case's action.
var classifyRows = map[string][]classifyCase{
	"2xx, 3xx": {
		{method: "GET", resp: func() *http.Response { return response(200, "") }, want: resilient.Success},
		{method: "POST", keyed: true, resp: func() *http.Response { return response(201, "", "Idempotency-Status: replayed") }, want: resilient.Success},
		{method: "GET", resp: func() *http.Response { return response(304, "") }, want: resilient.Success},
	},
	"dial error, connection refused (nothing sent)": {
		{method: "POST", err: dialErr(), want: resilient.Retry},
		{method: "GET", err: dialErr(), want: resilient.Retry},
	},
	"reset, EOF, timeout after sending": {
		{method: "GET", err: readErr(), want: resilient.Retry},
		{method: "POST", keyed: true, err: errors.Join(errors.New("read"), io.EOF), want: resilient.Retry},
		{method: "POST", keyed: true, err: context.DeadlineExceeded, want: resilient.Retry},
		{method: "POST", err: readErr(), want: resilient.Terminal}, // not idempotent, no key, no precondition
	},
	"408, 425": {
		{method: "GET", resp: func() *http.Response { return response(408, "") }, want: resilient.Retry},
		{method: "GET", resp: func() *http.Response { return response(425, "") }, want: resilient.Retry},
	},
	"429": {
		{method: "POST", resp: func() *http.Response { return response(429, "", "Retry-After: 3") }, want: resilient.Retry},
	},
	"500, 502, 503, 504": {
		{method: "GET", resp: func() *http.Response { return response(500, "") }, want: resilient.Retry},
		{method: "GET", resp: func() *http.Response { return response(502, "") }, want: resilient.Retry},
		{method: "POST", keyed: true, resp: func() *http.Response { return response(503, "") }, want: resilient.Retry},
		{method: "PUT", resp: func() *http.Response { return response(504, "") }, want: resilient.Retry},
		{method: "POST", resp: func() *http.Response { return response(500, "") }, want: resilient.Terminal}, // not idempotent, no key
	},
	`409 "in progress" on a keyed request`: {
		{method: "POST", keyed: true, resp: func() *http.Response { return response(409, draftInProgress, problemJSON) }, want: resilient.Retry},
		{method: "POST", keyed: true, resp: func() *http.Response { return response(409, stripeInUse, appJSON) }, want: resilient.Retry},
	},
	"422 or 409 `payload_mismatch`": {
		{method: "POST", keyed: true, resp: func() *http.Response { return response(422, draftMismatch, problemJSON) }, want: resilient.Terminal},
		{method: "POST", keyed: true, resp: func() *http.Response { return response(409, stripeMismatch, appJSON) }, want: resilient.Terminal},
	},
	"412": {
		{method: "PATCH", resp: func() *http.Response { return response(412, "") }, want: resilient.Terminal},
	},
	"400, 401, 403, 404, other 4xx": {
		{method: "POST", keyed: true, resp: func() *http.Response { return response(400, "") }, want: resilient.Terminal},
		{method: "GET", resp: func() *http.Response { return response(401, "") }, want: resilient.Terminal},
		{method: "GET", resp: func() *http.Response { return response(403, "") }, want: resilient.Terminal},
		{method: "GET", resp: func() *http.Response { return response(404, "") }, want: resilient.Terminal},
		{method: "GET", resp: func() *http.Response { return response(410, "") }, want: resilient.Terminal},
	},
	"501, 505, TLS verification failure": {
		{method: "GET", resp: func() *http.Response { return response(501, "") }, want: resilient.Terminal},
		{method: "GET", resp: func() *http.Response { return response(505, "") }, want: resilient.Terminal},
		{method: "GET", err: x509.UnknownAuthorityError{}, want: resilient.Terminal},
	},
	"the client's own limits and configuration (`MaxResponseHeaderBytes`, a scheme no RoundTripper serves, `http.ErrSchemeMismatch`, a body shorter than its `ContentLength`)": {
		{method: "GET", err: errors.New("net/http: server response headers exceeded 1048576 bytes; aborted"), want: resilient.Terminal},
		{method: "GET", err: errors.New(`unsupported protocol scheme "ftp"`), want: resilient.Terminal},
		{method: "GET", err: http.ErrSchemeMismatch, want: resilient.Terminal},
		{method: "POST", keyed: true, err: errors.New("http: ContentLength=10 with Body length 2"), want: resilient.Terminal},
	},
	"caller's context done": {
		{method: "GET", err: context.Canceled, want: resilient.Terminal},
	},
}

// TestClassificationTable parses docs/classification.md's classification
// table and runs DefaultClassifier on each row's cases: every row has
// cases here, each case's category is one the row names, and the row's
// decision begins with its first case's action. A row added to the docs
// without cases, or a case that no longer classifies as its row says,
// fails.
func TestClassificationTable(t *testing.T) {
	b, err := os.ReadFile("docs/classification.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "## Classification\n")
	require.GreaterOrEqual(t, start, 0)
	rows := 0
	for _, line := range strings.Split(doc[start:], "\n")[1:] {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| outcome ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, 3, line)
		rows++
		row, decision, category := cells[0], cells[1], cells[2]
		cases, ok := classifyRows[row]
		if !assert.True(t, ok, "the row %q has no cases in classifyRows", row) {
			continue
		}
		t.Run(row, func(t *testing.T) {
			for i, c := range cases {
				var resp *http.Response
				if c.resp != nil {
					resp = c.resp()
				}
				d := resilient.DefaultClassifier(outcome(c.method, c.keyed, resp, c.err))
				assert.Equal(t, c.want, d.Action, "case %d (%s)", i, c.method)
				cat := "—"
				if d.Category != "" {
					cat = "`" + string(d.Category) + "`"
				}
				assert.Contains(t, category, cat, "case %d (%s): its category is one the row names", i, c.method)
				if i == 0 {
					assert.True(t, strings.HasPrefix(decision, strings.ToLower(d.Action.String())),
						"the row's decision %q begins with its first case's action, %s", decision, d.Action)
				}
			}
		})
	}
	assert.Equal(t, len(classifyRows), rows, "every row of classifyRows is a row of the docs' table")
}
