package resilient_test

import (
	"net/http"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression: header fields net/http refuses (with an untyped error the
// classifier took for transient) are refused before anything is sent, without
// echoing the value.
func TestInvalidHeaderFieldsAreRefused(t *testing.T) {
	for name, set := range map[string]func(http.Header){
		"CRLF in value": func(h http.Header) { h["X-Note"] = []string{"secret\r\nInjected: 1"} },
		"NUL in value":  func(h http.Header) { h["X-Note"] = []string{"secret\x00"} },
		"space in name": func(h http.Header) { h["Bad Name"] = []string{"v"} },
		"colon in name": func(h http.Header) { h["Bad:Name"] = []string{"v"} },
		"empty name":    func(h http.Header) { h[""] = []string{"v"} },
	} {
		t.Run(name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(200))
			req, _ := http.NewRequest(http.MethodGet, target, nil)
			set(req.Header)
			_, err := resilient.NewTransport(s, fast()...).RoundTrip(req)
			require.ErrorIs(t, err, resilient.ErrInvalidRequest)
			assert.NotContains(t, err.Error(), "secret")
			assert.Empty(t, s.Attempts())
		})
	}
	s := stubtest.New(stubtest.Reply(200))
	req, _ := http.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("X-Tabbed", "a\tb")
	_, err := do(t, resilient.NewTransport(s, fast()...), req)
	require.NoError(t, err, "HTAB is allowed in values")
}
