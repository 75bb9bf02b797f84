package persist_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
)

// TestFingerprintIsTheTransports: Fingerprint gives what the Transport
// stores in a Store for the same request, whatever the body.
func TestFingerprintIsTheTransports(t *testing.T) {
	big := strings.Repeat("x", 2<<20) // over the Transport's 1 MiB buffer
	tests := []struct {
		name   string
		method string
		url    string
		body   func() io.Reader
	}{
		{"no body", http.MethodPost, "http://api.test/v1/payments?x=1", func() io.Reader { return nil }},
		{"strings", http.MethodPost, "http://api.test/v1/payments", func() io.Reader { return strings.NewReader(`{"order":"o1"}`) }},
		{"bytes", http.MethodPatch, "http://api.test/v1/orders/o1", func() io.Reader { return bytes.NewReader([]byte(`{"a":1}`)) }},
		{"over the buffer", http.MethodPost, "http://api.test/v1/uploads", func() io.Reader { return strings.NewReader(big) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := persist.NewMemory()
			client := &http.Client{Transport: resilient.NewTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: r}, nil
			}), resilient.WithStore(store))}
			req, err := http.NewRequestWithContext(resilient.ContextWithOperation(context.Background(), "op"), tt.method, tt.url, tt.body())
			require.NoError(t, err)
			want, err := persist.Fingerprint(req)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			pending, err := store.Pending(t.Context())
			require.NoError(t, err)
			var stored string
			if len(pending) == 1 {
				stored = pending[0].Fingerprint
			} else {
				rec, _, err := store.Claim(t.Context(), persist.Record{Operation: "op", Key: "unused"})
				require.NoError(t, err)
				stored = rec.Fingerprint
			}
			assert.Equal(t, want, stored)
		})
	}
}

func TestFingerprintRefuses(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://api.test/", io.NopCloser(strings.NewReader("x")))
	require.NoError(t, err)
	_, err = persist.Fingerprint(req)
	require.Error(t, err, "a body without GetBody")
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	_, err = persist.Fingerprint(req)
	require.Error(t, err)
	_, err = persist.Fingerprint(nil)
	require.Error(t, err)
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
