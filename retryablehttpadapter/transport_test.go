package retryablehttpadapter_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/resilienthttp/resilient/retryablehttpadapter"
	"github.com/stretchr/testify/assert"
)

type failingBase struct {
	err    error
	closed int
}

func (b *failingBase) RoundTrip(*http.Request) (*http.Response, error) { return nil, b.err }
func (b *failingBase) CloseIdleConnections()                           { b.closed++ }

// TestTransportKeepsTheError: the wrapper adds the request, not a new message
// or a broken chain.
func TestTransportKeepsTheError(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection reset by peer")
	base := &failingBase{err: cause}
	rt := retryablehttpadapter.Transport(base)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", nil)
	resp, err := rt.RoundTrip(req)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, cause.Error(), err.Error())

	rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	assert.Equal(t, 1, base.closed)
}
