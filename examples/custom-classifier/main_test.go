package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCustomClassifier(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	t.Log("\n" + out.String())

	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(line)
		rows[f[0]+" "+f[1]] = f[2:]
	}
	// route classifier → attempts…, category, action, body
	assert.Equal(t, []string{"400", "VALIDATION", "terminal", `{"code":"card_declined_try_again","message":"issuer`, `unavailable"}`}, rows["/v1/declined default"])
	assert.Equal(t, []string{"400", "→", "201", "-", "success", `{"id":"ch_1","status":"succeeded"}`}, rows["/v1/declined provider"])
	assert.Equal(t, []string{"402", "VALIDATION", "terminal", `{"code":"authentication_pending"}`}, rows["/v1/required default"])
	assert.Equal(t, []string{"402", "→", "201", "-", "success", `{"id":"ch_1","status":"succeeded"}`}, rows["/v1/required provider"])
	assert.Equal(t, []string{"400", "VALIDATION", "terminal", `{"code":"invalid_amount"}`}, rows["/v1/invalid default"])
	assert.Equal(t, []string{"400", "VALIDATION", "terminal", `{"code":"invalid_amount"}`}, rows["/v1/invalid provider"])
	assert.Equal(t, []string{"200", "-", "success", `{"status":"duplicate","id":"ch_0"}`}, rows["/v1/duplicate default"])
	// The body the classifier peeked at reaches the caller whole.
	assert.Equal(t, []string{"200", "PROVIDER.duplicate", "terminal", `{"status":"duplicate","id":"ch_0"}`}, rows["/v1/duplicate provider"])
}

// stripEcho is a base transport that removes the provider's echo of the
// idempotency key from every answer, as if it were a server that ignores
// keys.
type stripEcho struct{ base http.RoundTripper }

func (s stripEcho) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if resp != nil {
		resp.Header.Del("Idempotency-Key")
	}
	return resp, err
}

// Without the echo nothing shows that the provider dedupes by key: the retry
// the classifier asks for is not sent (a 400 may have been applied, for all
// the Transport knows), and the caller gets the first answer, as a bare
// client would.
func TestNoEchoNoResend(t *testing.T) {
	srv := newProvider()
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: resilient.NewTransport(stripEcho{base}, resilient.WithClassifier(providerClassifier))}

	rep := new(resilient.Report)
	req, err := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), rep), http.MethodPost,
		srv.URL+"/v1/declined", strings.NewReader(`{"amount":1000,"currency":"eur"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Len(t, rep.Attempts, 1)
	assert.Equal(t, resilient.CategoryTransient, rep.Attempts[0].Category, "the classifier still says retryable")
	assert.ErrorIs(t, rep.Stopped, resilient.ErrUnsafeRetry)
}
