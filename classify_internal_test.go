package resilient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClassifyWritesNothing: the verdict (call.verdict: classify, then the
// unsafe-retry guard) says everything it found
// (the decision, the error as the caller is to see it, why the Transport
// will not retry, whether the answer shows the server dedupes), and it
// changes nothing: not the attempt, nor anything it points to (the request,
// the response, their headers, the body), not the operation, not the host's
// evidence, which observe records from the verdict.
func TestClassifyWritesNothing(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	resetErr := errors.New("connection reset by peer")
	tests := []struct {
		name   string
		ctx    context.Context
		status int    // 0: the attempt failed with resetErr
		echo   bool   // the answer echoes the key
		action Action // the verdict's
		stop   error
		shown  bool
	}{
		{name: "caller gave up", ctx: cancelled, action: Terminal},
		{name: "unsafe retry without evidence", ctx: context.Background(), status: http.StatusBadGateway, action: Terminal, stop: ErrUnsafeRetry},
		{name: "answer shows the server dedupes", ctx: context.Background(), status: http.StatusBadGateway, echo: true, action: Retry, shown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTransport(nil)
			req, err := http.NewRequestWithContext(tt.ctx, http.MethodPost, "http://api.test/v1/charges", nil)
			require.NoError(t, err)
			now := time.Unix(1_700_000_000, 0)
			c := &call{t: tr, cfg: &tr.cfg, Applicant: host.Applicant{Cfg: &tr.hc, Req: req, Ctx: tt.ctx}, h: tr.hosts.Host(req.URL.Host, now.UnixNano())}
			c.op.key, c.op.unsafe = "0190b6c5-7d2a-7cc4-8b5e-2f3c4d5e6f70", true
			a := wire.Attempt{N: 0, Req: req, Sent: true, End: now.UnixNano(), Writes: wire.Writes{Traced: true, Any: true}}
			if tt.status == 0 {
				a.Err = resetErr
			} else {
				a.Resp = &http.Response{StatusCode: tt.status, Header: http.Header{}, Body: &watchedBody{r: strings.NewReader("upstream down")}}
				if tt.echo {
					a.Resp.Header.Set(tr.cfg.keyHeader, c.op.key)
				}
			}
			before := deepState(&a, &c.op)

			v := c.verdict(&a)

			assert.Equal(t, before, deepState(&a, &c.op), "the attempt, what it points to and the operation are unchanged")
			assert.Equal(t, tt.action, v.d.Action)
			assert.Equal(t, tt.stop, v.stop)
			assert.Equal(t, tt.shown, v.shown)
			if tt.status == 0 {
				assert.ErrorIs(t, v.err, context.Canceled, "the caller's context is in the error the caller sees")
				assert.ErrorIs(t, v.err, resetErr)
			}
			assert.False(t, c.h.Evidence.Has(host.RouteOf(req), now.UnixNano()), "classify records no evidence")
			c.observe(&a, v)
			assert.Equal(t, tt.shown, c.h.Evidence.Has(host.RouteOf(req), now.UnixNano()), "observe records what the verdict shows")
		})
	}
}

// classifyState is a deep copy of what classify is given: the attempt, the
// request and response it points to (headers cloned), what is left of the
// response body, and what the verdict reads of the operation.
type classifyState struct {
	a          wire.Attempt
	req        http.Request
	resp       *http.Response
	bodyLeft   int
	bodyClosed bool
	key        string
	own        bool
	unsafe     bool
}

func deepState(a *wire.Attempt, op *operation) classifyState {
	st := classifyState{a: *a, req: *a.Req, key: op.key, own: op.own, unsafe: op.unsafe}
	st.req.Header = a.Req.Header.Clone()
	if a.Resp != nil {
		resp := *a.Resp
		resp.Header = a.Resp.Header.Clone()
		st.resp = &resp
		if b, ok := a.Resp.Body.(*watchedBody); ok {
			st.bodyLeft, st.bodyClosed = b.r.Len(), b.closed
		}
	}
	return st
}

// watchedBody is a response body whose reads and close can be seen.
type watchedBody struct {
	r      *strings.Reader
	closed bool
}

func (b *watchedBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *watchedBody) Close() error               { b.closed = true; return nil }
